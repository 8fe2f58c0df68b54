#!/usr/bin/env bash
# Executes every notebook headless with Debian's python3 (nbconvert), writing the executed copies and
# their figures under OUT, then checks each expected PNG exists and is not trivial (size, not blank).
# Exits non-zero if a cell errors or a figure is missing.
set -euo pipefail
out=${1:?usage: run-notebooks.sh OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
mkdir -p "$out/figures"
cd "$here/notebooks"
failed=0
for notebook in schedule_timeline partition_sweep predicted_vs_measured; do
  if PIPETWIN_FIGURES="$out/figures" PIPETWIN_NOTEBOOKS="$here/notebooks" \
     "$python" -m nbconvert --to notebook --execute --output-dir "$out" "$notebook.ipynb" > "$out/$notebook.log" 2>&1; then
    echo "notebook $notebook: executed"
  else
    echo "notebook $notebook: FAILED"; tail -20 "$out/$notebook.log"; failed=1
  fi
done
"$python" - "$out/figures" <<'PY'
import os, sys
import matplotlib.image as image
folder = sys.argv[1]
expected = ["schedule_timeline.png", "partition_sweep_heatmap.png", "partition_sweep_memory.png",
            "partition_sweep_search.png",
            "predicted_vs_measured_timeline.png", "predicted_vs_measured_errors.png"]
passed = failed = 0
for name in expected:
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        print(f"{name}: missing"); failed += 1; continue
    size = os.path.getsize(path)
    pixels = image.imread(path)
    spread = float(pixels[..., :3].std())
    if size < 10_000 or spread < 0.02:
        print(f"{name}: trivial ({size} bytes, pixel spread {spread:.3f})"); failed += 1
    else:
        print(f"{name}: {size} bytes, pixel spread {spread:.3f}"); passed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
exit $failed
