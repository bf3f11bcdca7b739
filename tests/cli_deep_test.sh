#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# Long programs (issue 14, item 2): the parser bounds nesting but not length, so every stage must take
# a program of any length without recursing along it: 20,000 chained terms in one expression, 30,000
# chained statements, a chain of norms longer than a kernel's phases, and size expressions that grow with
# every statement (refused with one error line).

python3 -c "print('x: f32[4]; y = x' + ' + 1' * 20000)" >"$tmp/terms.lt"
python3 -c "
n = 30000
print('; '.join(['x: f32[4]', 'a0 = x * 0'] + ['a%d = a%d + 1' % (i, i - 1) for i in range(1, n)] + ['y = a%d' % (n - 1)]))
" >"$tmp/stmts.lt"

for prog in terms stmts; do
  # the graph and tensor stages do not depend on the target
  expect "deep_${prog}_graph" 0 "^return " -- compile "$tmp/$prog.lt" --ir graph
  expect "deep_${prog}_tensor" 0 " = map\\(" -- compile "$tmp/$prog.lt" --ir tensor
  for stage in loop tile kernel code; do
    for target in cpu cuda; do
      expect "deep_${prog}_${stage}_$target" 0 "kernel|void|__global__" -- compile "$tmp/$prog.lt" --ir "$stage" --target "$target"
    done
  done
  expect "deep_${prog}_run_check" 0 "^check [a-z0-9]+: max relative error .* ok" -- run "$tmp/$prog.lt" --target cpu --check
done

# the value is right, not only close to the reference's: x * 0 + 29999 * 1
expect deep_stmts_value 0 "a29999: f32\[4\] = \[29999, 29999, 29999, 29999\]" -- run "$tmp/stmts.lt" --target cpu

# 20 norms in a chain need more reduction phases than one kernel holds: split, not an internal error
python3 -c "
print('; '.join(['x: f32[2,64]', 'w: f32[64]', 'a0 = rms_norm(x, w, 1e-6)'] + ['a%d = rms_norm(a%d, w, 1e-6)' % (i, i - 1) for i in range(1, 20)] + ['y = a19']))
" >"$tmp/norms.lt"
expect deep_norm_chain 0 "check a19: max relative error .* ok" -- run "$tmp/norms.lt" --target cpu --check

# each concat of a run-time size adds a term to the result's size: refused once it is too deep
python3 -c "
print('; '.join(['x: f32[seq]', 'a0 = concat(x, x, 0)'] + ['a%d = concat(a%d, x, 0)' % (i, i - 1) for i in range(1, 200)] + ['y = a199']))
" >"$tmp/concat.lt"
expect_error deep_size_expression ":1:[0-9]+: error: concat: the size of dimension 0 is an expression of more than 64 nested terms" -- compile "$tmp/concat.lt" --ir graph
