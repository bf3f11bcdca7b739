/* The server's pure parts: OpenAI request parsing (every field understood or refused by name), the response
 * and chunk shapes, stop-string cutting and holding back, and the Prometheus text. */
#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/metrics.h"
#include "server/stop_text.h"

static int parse(const char *body, ApiKind kind, ApiRequest *r, ApiError *e) {
  memset(e, 0, sizeof *e);
  return api_parse_request(body, strlen(body), kind, r, e);
}

/* body must be refused with 400 naming param (NULL: no param) and saying `says` */
static void refused(const char *body, ApiKind kind, const char *param, const char *says) {
  ApiRequest r;
  ApiError e;
  if (parse(body, kind, &r, &e)) fail_msg("accepted: %s", body);
  assert_int_equal(e.status, 400);
  assert_string_equal(e.param, param ? param : "");
  assert_contains(e.message, says);
  api_request_free(&r);
}

static void completion_fields(void **state) {
  ApiRequest r;
  ApiError e;
  assert_true(parse("{\"model\": \"m\", \"prompt\": \"hi\", \"max_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.9, "
                    "\"top_k\": 3, \"seed\": 42, \"stop\": [\"a\", \"bc\"], \"stream\": true, \"stream_options\": "
                    "{\"include_usage\": true}, \"echo\": true, \"n\": 1, \"presence_penalty\": 0, \"user\": \"u\", "
                    "\"logprobs\": null}",
                    API_COMPLETION, &r, &e));
  assert_string_equal(r.model, "m");
  assert_string_equal(r.prompt_text, "hi");
  assert_int_equal(r.max_tokens, 7);
  assert_true(r.sampling.temperature == 0.5 && r.sampling.top_p == 0.9 && r.sampling.top_k == 3);
  assert_false(r.sampling.greedy);
  assert_true(r.seed_given && r.sampling.seed == 42);
  assert_int_equal(r.nstop, 2);
  assert_string_equal(r.stop[1], "bc");
  assert_true(r.stream && r.include_usage && r.echo);
  api_request_free(&r);
  assert_true(parse("{\"prompt\": \"x\", \"presence_penalty\": 0.5, \"frequency_penalty\": -1, \"logprobs\": 3}",
                    API_COMPLETION, &r, &e));
  assert_true(r.presence_penalty == 0.5 && r.frequency_penalty == -1 && r.logprobs && r.top_logprobs == 3);
  api_request_free(&r);
  /* echo with logprobs: the prompt's tokens get theirs too */
  assert_true(parse("{\"prompt\": \"x\", \"echo\": true, \"logprobs\": 2}", API_COMPLETION, &r, &e));
  assert_true(r.echo && r.logprobs && r.top_logprobs == 2);
  api_request_free(&r);
  assert_true(
      parse("{\"prompt\": \"x\", \"ignore_eos\": true, \"min_tokens\": 4, \"max_tokens\": 4}", API_COMPLETION, &r, &e));
  assert_true(r.ignore_eos && r.min_tokens == 4);
  api_request_free(&r);
  assert_true(parse("{\"prompt\": \"x\", \"n\": 3, \"best_of\": 3}", API_COMPLETION, &r, &e));
  assert_true(r.n == 3 && r.best_of == 3);
  api_request_free(&r);
  assert_true(parse("{\"prompt\": \"x\", \"echo\": true, \"max_tokens\": 0}", API_COMPLETION, &r, &e));
  assert_int_equal(r.max_tokens, 0);
  api_request_free(&r);
  assert_true(
      parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true, \"top_logprobs\": 4}",
            API_CHAT, &r, &e));
  assert_true(r.logprobs && r.top_logprobs == 4);
  api_request_free(&r);
  /* defaults: OpenAI's temperature 1 and top_p 1; temperature 0 is greedy; a token-id prompt */
  assert_true(parse("{\"prompt\": [[1, 2, 3]]}", API_COMPLETION, &r, &e));
  assert_true(r.sampling.temperature == 1 && r.sampling.top_p == 1 && !r.sampling.greedy && r.max_tokens == -1);
  assert_int_equal(r.nprompt_ids, 3);
  assert_int_equal(r.prompt_ids[2], 3);
  api_request_free(&r);
  assert_true(parse("{\"prompt\": [\"x\"], \"temperature\": 0, \"stop\": \"s\"}", API_COMPLETION, &r, &e));
  assert_true(r.sampling.greedy && r.nstop == 1 && !strcmp(r.prompt_text, "x"));
  api_request_free(&r);
}

static void chat_messages(void **state) {
  ApiRequest r;
  ApiError e;
  assert_true(parse("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": "
                    "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}], "
                    "\"max_completion_tokens\": 3}",
                    API_CHAT, &r, &e));
  assert_int_equal(r.nmessages, 2);
  assert_string_equal(r.messages[0].role, "system");
  assert_string_equal(r.messages[1].content, "ab");
  assert_int_equal(r.max_tokens, 3);
  api_request_free(&r);
  refused("{\"messages\": []}", API_CHAT, "messages", "non-empty list");
  refused("{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", API_CHAT, "messages[0]", "role");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"name\": \"n\"}]}", API_CHAT, "messages[0]",
          "'messages[0].name' is not supported");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", API_CHAT,
          "messages[0].content", "only text");
  refused("{\"prompt\": \"x\"}", API_CHAT, "prompt", "not supported"); /* a completion's field */
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": true}", API_CHAT, "echo",
          "not supported");
}

static void refusals_name_the_field(void **state) {
  refused("{\"prompt\": ", API_COMPLETION, NULL, "not valid JSON");
  refused("[1]", API_COMPLETION, NULL, "JSON object");
  refused("{\"max_tokens\": 3}", API_COMPLETION, "prompt", "required");
  refused("{\"prompt\": \"x\", \"max_tokens\": \"8\"}", API_COMPLETION, "max_tokens", "integer");
  refused("{\"prompt\": \"x\", \"min_tokens\": 5, \"max_tokens\": 4}", API_COMPLETION, "min_tokens",
          "must not exceed 'max_tokens' (4)");
  refused("{\"prompt\": \"x\", \"min_tokens\": 2, \"stop\": \"a\"}", API_COMPLETION, "min_tokens", "not supported");
  refused("{\"prompt\": \"x\", \"min_tokens\": -1}", API_COMPLETION, "min_tokens", "between 0");
  refused("{\"prompt\": \"x\", \"max_tokens\": 0}", API_COMPLETION, "max_tokens",
          "0 only for a completion with 'echo'");
  refused("{\"prompt\": \"x\", \"max_tokens\": -1, \"echo\": true}", API_COMPLETION, "max_tokens", "between 0");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_completion_tokens\": 0}", API_CHAT,
          "max_completion_tokens", "between 1");
  refused("{\"prompt\": \"x\", \"temperature\": 3}", API_COMPLETION, "temperature", "between 0 and 2");
  refused("{\"prompt\": \"x\", \"top_p\": 0}", API_COMPLETION, "top_p", "greater than 0");
  refused("{\"prompt\": \"x\", \"n\": 17}", API_COMPLETION, "n", "between 1 and 16");
  refused("{\"prompt\": \"x\", \"n\": 2, \"stream\": true}", API_COMPLETION, "n", "not supported with 'stream'");
  refused("{\"prompt\": \"x\", \"best_of\": 3}", API_COMPLETION, "best_of", "must equal 'n' (1)");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"best_of\": 2}", API_CHAT, "best_of",
          "not supported");
  refused("{\"prompt\": \"x\", \"frequency_penalty\": 2.5}", API_COMPLETION, "frequency_penalty", "between -2 and 2");
  refused("{\"prompt\": \"x\", \"presence_penalty\": \"1\"}", API_COMPLETION, "presence_penalty", "number");
  refused("{\"prompt\": \"x\", \"logprobs\": 21}", API_COMPLETION, "logprobs", "between 0 and 20");
  refused("{\"prompt\": \"x\", \"logprobs\": true}", API_COMPLETION, "logprobs", "integer");
  refused("{\"prompt\": \"x\", \"top_logprobs\": 2}", API_COMPLETION, "top_logprobs", "not supported");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", API_CHAT, "top_logprobs",
          "needs 'logprobs'");
  refused("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 1}", API_CHAT, "logprobs",
          "true or false");
  refused("{\"prompt\": \"x\", \"logit_bias\": {\"1\": 5}}", API_COMPLETION, "logit_bias", "not supported");
  refused("{\"prompt\": \"x\", \"tools\": []}", API_COMPLETION, "tools", "'tools' is not supported");
  refused("{\"prompt\": \"x\", \"response_format\": {}}", API_COMPLETION, "response_format", "not supported");
  refused("{\"prompt\": \"x\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}", API_COMPLETION,
          "stop", "at most 8");
  refused("{\"prompt\": \"x\", \"stop\": \"\"}", API_COMPLETION, "stop", "empty");
  refused("{\"prompt\": \"x\", \"stop\": [1]}", API_COMPLETION, "stop", "stop[0]");
  refused("{\"prompt\": [\"a\", \"b\"]}", API_COMPLETION, "prompt", "only one per request");
  refused("{\"prompt\": [1, -2]}", API_COMPLETION, "prompt", "prompt[1]");
  refused("{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", API_COMPLETION, "stream_options",
          "only allowed when 'stream' is true");
  refused("{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"x\": 1}}", API_COMPLETION, "stream_options",
          "stream_options.x");
  refused("{\"prompt\": \"x\", \"prompt\": \"y\"}", API_COMPLETION, NULL, "duplicate");
}

static void response_shapes(void **state) {
  ApiIdent id;
  api_ident_init(&id, API_CHAT, 7, "m");
  ApiUsage u = {5, 3};
  char *s = api_completion_body(&id, "hi \"x\"", "stop", &u, NULL);
  assert_contains(s, "\"object\":\"chat.completion\"");
  assert_contains(s, "\"message\":{\"role\":\"assistant\",\"content\":\"hi \\\"x\\\"\"}");
  assert_contains(s, "\"finish_reason\":\"stop\"");
  assert_contains(s, "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}");
  assert_true(!strncmp(id.id, "chatcmpl-", 9));
  free(s);
  s = api_chunk_event(&id, "", 1, NULL, NULL, 1, NULL);
  assert_true(!strncmp(s, "data: {", 7) && !strcmp(s + strlen(s) - 3, "}\n\n"));
  assert_contains(s, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
  assert_contains(s, "\"usage\":null");
  free(s);
  s = api_chunk_event(&id, NULL, 0, NULL, &u, 1, NULL);
  assert_contains(s, "\"choices\":[]");
  assert_contains(s, "\"total_tokens\":8");
  free(s);
  api_ident_init(&id, API_COMPLETION, 8, "m");
  s = api_chunk_event(&id, "tok", 0, "length", NULL, 0, NULL);
  assert_contains(s, "\"object\":\"text_completion\"");
  assert_contains(s, "\"text\":\"tok\"");
  assert_contains(s, "\"finish_reason\":\"length\"");
  assert_null(strstr(s, "usage"));
  free(s);
  /* logprobs: a completion's four lists with text offsets, a chat's content entries with bytes */
  TokenLogprob t[2] = {{.token = 65, .logprob = -0.5f, .end = 1, .ntop = 2, .top_ids = {65, 66}, .top_lp = {-0.5f, -1}},
                       {.token = 67, .logprob = -2, .end = 3, .ntop = 1, .top_ids = {66}, .top_lp = {-1.5f}}};
  json_t *lp = api_logprobs_json(API_COMPLETION, NULL, t, 0, 2, "abc", 0);
  s = json_dumps(lp, JSON_COMPACT);
  assert_contains(s, "\"token_logprobs\":[-0.5,-2.0]");
  assert_contains(s, "\"text_offset\":[0,1]");
  assert_contains(s, "\"tokens\":[\"\",\"\"]"); /* no tokenizer: empty strings */
  free(s);
  json_decref(lp);
  lp = api_logprobs_json(API_CHAT, NULL, t, 1, 2, "abc", 0);
  s = json_dumps(lp, JSON_COMPACT);
  assert_contains(
      s,
      "{\"content\":[{\"token\":\"\",\"logprob\":-2.0,\"bytes\":[],\"top_logprobs\":[{\"token\":\"\",\"logprob\":-1.5");
  free(s);
  json_decref(lp);
  /* an echoed prompt's logprobs: the first token has none (null), the rest their records; then the generated
   * tokens' appended, their offsets after the echo's characters */
  int32_t prompt[3] = {7, 65, 67};
  lp = api_prompt_logprobs_json(NULL, prompt, 3, t, 2, 1);
  api_logprobs_append(lp, api_logprobs_json(API_COMPLETION, NULL, t, 0, 1, "abc", 5));
  s = json_dumps(lp, JSON_COMPACT);
  assert_contains(s, "\"token_logprobs\":[null,-0.5,-2.0,-0.5]");
  assert_contains(s, "\"top_logprobs\":[null,{\"\":-1.0},{\"\":-1.5},{\"\":-1.0}]"); /* no tokenizer: one key */
  assert_contains(s, "\"text_offset\":[0,0,0,5]");
  free(s);
  json_decref(lp);
  assert_int_equal(api_text_chars("h\xc3\xa9llo"), 5);
  /* embeddings: base64 is the little-endian f32 bytes */
  float v[2] = {1.0f, -2.5f};
  s = api_embeddings_body("m", v, 1, 2, 1, 4);
  assert_contains(s, "\"embedding\":\"AACAPwAAIMA=\"");
  assert_contains(s, "\"usage\":{\"prompt_tokens\":4,\"total_tokens\":4}");
  free(s);
  s = api_embeddings_body("m", v, 1, 2, 0, 4);
  assert_contains(s, "\"embedding\":[1.0,-2.5]");
  free(s);
  ApiError e = {0};
  api_error(&e, 400, "invalid_request_error", "n", "bad %d", 2);
  api_error(&e, 500, "server_error", NULL, "later errors are ignored");
  s = api_error_body(&e);
  assert_string_equal(s, "{\"error\":{\"message\":\"bad 2\",\"type\":\"invalid_request_error\",\"param\":\"n\","
                         "\"code\":null}}");
  free(s);
}

static void stop_strings(void **state) {
  const char *stops[] = {"\n\nThe", "his"};
  const char *t = "Paris. This\n\nThe end";
  assert_int_equal(stop_find(t, strlen(t), stops, 2), 8); /* "his" of "This", before "\n\nThe" */
  assert_int_equal(stop_find(t, 8, stops, 2), -1);
  assert_int_equal(stop_find("abc", 3, stops, 0), -1);
  /* a tail that could grow into a stop string is held back, the rest can go */
  assert_int_equal(stop_safe_len("Paris.\n", 7, stops, 2), 6);
  assert_int_equal(stop_safe_len("Paris.\n\nTh", 10, stops, 2), 6);
  assert_int_equal(stop_safe_len("Paris.\n\nTx", 10, stops, 2), 10);
  assert_int_equal(stop_safe_len("Hi", 2, stops, 2), 2);
  assert_int_equal(stop_safe_len("Hi h", 4, stops, 2), 3);
  assert_int_equal(stop_safe_len("x", 1, stops, 0), 1);
}

static void metrics_text(void **state) {
  Metrics m;
  metrics_init(&m);
  metrics_request(&m, "/v1/completions", 200);
  metrics_request(&m, "/v1/completions", 200);
  metrics_request(&m, "other", 404);
  metrics_tokens(&m, 5, 3);
  metrics_ttft(&m, 0.2);
  metrics_itl(&m, 0.003);
  metrics_itl(&m, 100);
  EngineStats st = {.running = 2, .waiting = 1, .blocks_used = 9, .blocks_total = 64};
  StrBuf b = {0};
  metrics_render(&m, &st, &b);
  const char *s = sb_str(&b);
  assert_contains(s, "lathe_requests_total{route=\"/v1/completions\",status=\"200\"} 2\n");
  assert_contains(s, "lathe_requests_total{route=\"other\",status=\"404\"} 1\n");
  assert_contains(s, "lathe_prompt_tokens_total 5\n");
  assert_contains(s, "lathe_generated_tokens_total 3\n");
  assert_contains(s, "lathe_time_to_first_token_seconds_bucket{le=\"0.1\"} 0\n");
  assert_contains(s, "lathe_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n");
  assert_contains(s, "lathe_inter_token_latency_seconds_bucket{le=\"0.005\"} 1\n");
  assert_contains(s, "lathe_inter_token_latency_seconds_bucket{le=\"30\"} 1\n");
  assert_contains(s, "lathe_inter_token_latency_seconds_bucket{le=\"+Inf\"} 2\n");
  assert_contains(s, "lathe_inter_token_latency_seconds_count 2\n");
  assert_contains(s, "lathe_running_sequences 2\n");
  assert_contains(s, "lathe_waiting_sequences 1\n");
  assert_contains(s, "lathe_kv_blocks_used 9\n");
  assert_contains(s, "lathe_kv_blocks_total 64\n");
  sb_free(&b);
  metrics_destroy(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(completion_fields), cmocka_unit_test(chat_messages), cmocka_unit_test(refusals_name_the_field),
      cmocka_unit_test(response_shapes),   cmocka_unit_test(stop_strings),  cmocka_unit_test(metrics_text),
  };
  return cmocka_run_group_tests_name("server_api", tests, NULL, NULL);
}
