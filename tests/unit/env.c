/* Settings from the environment (src/env.h): what counts as a switch
 * turned off and as a number, and every way a value falls back. */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "env.h"

#define VAR "CUDAEV_TEST_ENV_SETTING"

Test(env, a_switch_is_off_only_when_set_to_zero) {
  unsetenv(VAR);
  cr_expect_not(cudaev__env_off(VAR));
  setenv(VAR, "0", 1);
  cr_expect(cudaev__env_off(VAR));
  const char *on[] = {"", "1", "00", "0 ", "off", "no"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    setenv(VAR, on[i], 1);
    cr_expect_not(cudaev__env_off(VAR), "'%s' is not off", on[i]);
  }
}

Test(env, a_number_counts_only_whole_and_in_range) {
  unsetenv(VAR);
  cr_expect_eq(cudaev__env_num(VAR, 0, 100, 7), 7, "unset");
  const struct {
    const char *v;
    long long want;
  } cases[] = {
      {"0", 0},
      {"100", 100},
      {"42", 42},
      {"-1", 7},
      {"101", 7},
      {"", 7},
      {"12x", 7},
      {"x12", 7},
      {" 5", 5},
      {"5 ", 7},
      {"99999999999999999999", 7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv(VAR, cases[i].v, 1);
    cr_expect_eq(cudaev__env_num(VAR, 0, 100, 7), cases[i].want, "'%s'", cases[i].v);
  }
  setenv(VAR, "-5", 1);
  cr_expect_eq(cudaev__env_num(VAR, -10, 10, 0), -5, "negative ranges");
  unsetenv(VAR);
}
