#!/usr/bin/env bash
# The release binary carries no fault hooks: no TRIDENT_TEST_* variable can make it stall or die.
# trident_test, built from the same main.cpp with TRIDENT_TEST_HOOKS, does (so this check can fail).
#   no_test_hooks.sh TRIDENT TRIDENT_TEST
set -uo pipefail
trident=$1 trident_test=$2
grep -qa TRIDENT_TEST_ "$trident_test" || { echo "FAIL: $trident_test has no TRIDENT_TEST_ hooks"; exit 1; }
if grep -qa TRIDENT_TEST_ "$trident"; then echo "FAIL: $trident contains TRIDENT_TEST_ hooks"; exit 1; fi
echo "ok: $trident has no test hooks; $trident_test has them"
