#!/usr/bin/env bash
# Writes the seed corpus of fuzz_program into DIR: every program text in the tests, one file each. From the CLI
# scripts, the single-quoted arguments of -e and P='...'; from the cmocka tests, each C string literal (adjacent
# literals joined) that declares an input (`name: dtype[`), with its escapes decoded.
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$(dirname "$0")/.."
perl -e '
  use strict; my ($dir) = @ARGV; my $n = 0; my %seen;
  sub emit { my $s = shift; return if $seen{$s}++; open(my $f, ">", sprintf("%s/seed_%04d", $dir, $n++)) or die; print $f $s; close $f; }
  for my $file (glob("tests/cli*_test.sh")) {
    open(my $f, "<", $file) or die; local $/; my $t = <$f>;
    while ($t =~ /(?:-e |P=)\x27([^\x27]*)\x27/g) { emit($1) if $1 =~ /:/; }
  }
  for my $file (glob("tests/test_*.c")) {
    open(my $f, "<", $file) or die; local $/; my $t = <$f>;
    while ($t =~ /((?:"(?:[^"\\\n]|\\.)*"\s*)+)/g) {
      my $lits = $1; my $s = "";
      while ($lits =~ /"((?:[^"\\\n]|\\.)*)"/g) { $s .= $1; }
      next unless $s =~ /\w+: *(?:f32|f16|bf16|i32|i64|bool)\[/;
      $s =~ s/\\n/\n/g; $s =~ s/\\t/\t/g; $s =~ s/\\"/"/g; $s =~ s/\\\\/\\/g;
      emit($s);
    }
  }
  print "$n seeds\n";
' "$dir"
