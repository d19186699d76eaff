# Sourced by scripts/setup.sh and scripts/mosaic_env.sh: `install_packages VENV ARGS...` installs
# ARGS (pip install's arguments) into the venv VENV with uv where uv can be had, else with pip.
#
# Why uv: the test environment is torch's CUDA wheel and its NVIDIA libraries (6 GB unpacked) and
# some 140 packages, twice (.venv and .venv-mosaic). pip installs them one after the other on one
# core: 3 min 28 s for both from a fresh clone on the 2-core CI machine. uv unpacks them in
# parallel: 1 min 32 s, the bytecode compiled as pip compiles it (PYTHONDONTWRITEBYTECODE is set
# on these machines: a venv without it compiles at every import), the same 144 packages at the
# same versions (pip list compared).
#
# uv reads no pip configuration: pip's own settings (its config files and PIP_* variables, as
# `pip config list` shows them: the machine's wheel folders, extra indexes and constraints) are
# handed to uv as its UV_* variables, unless those are set already. Indexes are searched as pip
# searches them (the best match across all of them, not the first index that has the name).
# Where uv cannot be installed, or fails, pip does the install, as before, and a line says so.

_uv_settings_from_pip() {
    local key value
    while IFS='=' read -r key value; do
        value="${value#\'}"
        value="${value%\'}"
        case "${key#*.}" in
            index-url) export UV_INDEX_URL="${UV_INDEX_URL:-$value}" ;;
            extra-index-url) export UV_EXTRA_INDEX_URL="${UV_EXTRA_INDEX_URL:-$value}" ;;
            find-links) export UV_FIND_LINKS="${UV_FIND_LINKS:-${value// /,}}" ;;
            constraint) export UV_CONSTRAINT="${UV_CONSTRAINT:-$value}" ;;
        esac
    done < <("$1/bin/pip" config list 2>/dev/null)
}

# The release these scripts were measured with: a newer uv may resolve or install otherwise.
UV_SPEC="uv==0.13.9"

install_packages() {
    local venv="$1"
    shift
    if "$venv/bin/python" -m uv --version >/dev/null 2>&1 || "$venv/bin/pip" install "$UV_SPEC"; then
        (
            _uv_settings_from_pip "$venv"
            "$venv/bin/python" -m uv pip install --python "$venv/bin/python" \
                --compile-bytecode --index-strategy unsafe-best-match "$@"
        ) && return 0
        echo "installer: uv failed (above); pip installs instead"
    else
        echo "installer: uv could not be installed (above); pip installs instead"
    fi
    # A current pip resolves better; an offline machine keeps the venv's own.
    "$venv/bin/pip" install --upgrade pip || true
    "$venv/bin/pip" install "$@"
}
