# Sourced by scripts/deps/*.sh: `apt_install WHO PACKAGE...` installs those of the Debian packages
# that are missing, and nothing if all are present. Idempotent; runs `apt-get update` at most once,
# and only if an install without it fails; waits for the dpkg lock other jobs may hold.
apt_install() {
    local who=$1
    shift
    local missing=() p
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "$who: all packages present"
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    local apt_opts=(-o DPkg::Lock::Timeout=300)
    echo "$who: installing ${missing[*]}"
    if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
        $sudo apt-get "${apt_opts[@]}" update
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
    fi
}
