#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA source and header (*.cc *.h *.cu *.cuh) is formatted as
# clang-format formats it with the repository's .clang-format (Google style, 100 columns). Prints
# each file that differs and exits 1 if any does; exits 0 when all are formatted.
#
#   tools/check_format.sh          check (CI: .ci/run, through tools/run_tests.sh)
#   tools/check_format.sh --fix    reformat the files that differ, in place
#
# The CI's clang-format is Debian 12's (clang-format 14, tools/setup.sh); another major version
# may format some constructs differently, so a check with it is only a hint. CLANG_FORMAT names
# another binary. A region a human lays out on purpose is fenced by `// clang-format off` / `on`.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly ci_major=14
fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  *) echo "usage: tools/check_format.sh [--fix]" >&2; exit 2 ;;
esac

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format: $clang_format not found (tools/setup.sh installs it)" >&2
  exit 1
fi
version=$("$clang_format" --version)
major=$(sed -n 's/.*clang-format version \([0-9]*\).*/\1/p' <<<"$version")
if [ "$major" != "$ci_major" ]; then
  echo "check_format: note: $version; the CI uses clang-format $ci_major" >&2
fi

mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.h' '*.cu' '*.cuh')
if [ ${#files[@]} -eq 0 ]; then
  echo "check_format: no tracked C++ files found" >&2
  exit 1
fi

# One clang-format per file, in parallel; each prints one short line (a single write, so
# parallel lines never interleave): "bad FILE" when --dry-run --Werror reports "code should be
# clang-formatted", "error FILE: MESSAGE" for any other failure (an unreadable file, a bad
# .clang-format).
# shellcheck disable=SC2317  # (run through xargs)
check_files() {
  local f out
  for f in "$@"; do
    if ! out=$("$clang_format" --dry-run --Werror "$f" 2>&1 >/dev/null); then
      if grep -q "code should be clang-formatted" <<<"$out"; then
        printf 'bad %s\n' "$f"
      else
        printf 'error %s: %s\n' "$f" "$(head -n 1 <<<"$out")"
      fi
    fi
  done
}
export -f check_files
export clang_format
mapfile -t results < <(printf '%s\0' "${files[@]}" |
                       xargs -0 -n 8 -P "$(nproc)" bash -c 'check_files "$@"' check_files | sort)
bad=()
errors=()
for r in "${results[@]}"; do
  case "$r" in
    "bad "*) bad+=("${r#bad }") ;;
    *) errors+=("${r#error }") ;;
  esac
done
if [ ${#errors[@]} -ne 0 ]; then
  echo "check_format: $clang_format failed on ${#errors[@]} files, the first ones:" >&2
  printf '  %s\n' "${errors[@]:0:5}" >&2
  exit 1
fi

if [ ${#bad[@]} -eq 0 ]; then
  echo "check_format: ${#files[@]} files formatted"
  exit 0
fi
if [ "$fix" -eq 1 ]; then
  "$clang_format" -i "${bad[@]}"
  printf 'check_format: reformatted %s\n' "${bad[@]}"
  exit 0
fi
printf 'check_format: not formatted: %s\n' "${bad[@]}"
echo "check_format: ${#bad[@]} of ${#files[@]} files differ from clang-format's layout;" \
     "tools/check_format.sh --fix (or clang-format -i FILE) formats them" >&2
exit 1
