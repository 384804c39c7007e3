#!/usr/bin/env python3
"""One line summing up a `tilesearch measure --json` result: error, median and min ms, the check's
max abs error, registers per kernel and the message.
Usage: measure_json_line.py RESULT.json NAME RC [LABEL] (RC: measure's exit status, printed when
the JSON is missing; LABEL: shown after the name, e.g. the precision)."""
import json
import sys


def main():
    path, name, rc = sys.argv[1:4]
    label = f" ({sys.argv[4]})" if len(sys.argv) > 4 else ""
    try:
        with open(path) as f:
            d = json.load(f)
    except Exception as e:  # noqa: BLE001 - any unreadable result is reported, not raised
        print(f"{name}{label}: rc {rc}, no result ({e})")
        return
    r = d.get("result", d)
    t = r.get("timing", {})
    regs = ",".join(str(k.get("registers_per_thread")) for k in r.get("kernels", []))
    print(f"{name}{label}: error {r.get('error')} median {t.get('median_ms')} ms "
          f"min {t.get('min_ms')} ms check max_abs {r.get('check', {}).get('max_abs_error')} "
          f"regs {regs} {r.get('message', '')[:300]}")


if __name__ == "__main__":
    main()
