# Sourced by the scripts in scripts/: installs the Debian packages given that
# are not installed yet (apt runs only when one is missing; as root only).
#   ensure_packages TAG PACKAGE...    TAG prefixes the messages
ensure_packages() {
  local tag=$1
  shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "$tag: missing packages: ${missing[*]}; run this as root (apt-get install)" >&2
    exit 1
  fi
  echo "$tag: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
