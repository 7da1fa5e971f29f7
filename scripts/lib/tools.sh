# Building the tools/ module's binaries into tools/bin (Jaeger, the
# collector distribution). Source it with ROOT set.

# build_tool NAME PKG [MODULE]: makes tools/bin/NAME from PKG of the tools
# module and prints its path. With MODULE (a dependency pinned in
# tools/go.mod), a binary already built at that version is reused;
# otherwise go build runs (its cache makes an unchanged build quick). The
# binary is built beside the target and moved into place, so an
# interrupted build leaves no half-written file (and go build never has to
# overwrite a file it did not write).
build_tool() {
  local name=$1 pkg=$2 module=${3:-} tools=$ROOT/tools out want have tmp
  out=$tools/bin/$name
  if [[ -n $module && -x $out ]]; then
    want=$(awk -v m="$module" '$1 == m { print $2; exit }' "$tools/go.mod")
    have=$(go version -m "$out" 2>/dev/null | awk -v m="$module" '($1 == "mod" || $1 == "dep") && $2 == m { print $3; exit }' || true)
    if [[ -n $want && $have == "$want" ]]; then
      echo "$out"
      return 0
    fi
  fi
  mkdir -p "$tools/bin"
  tmp=$(mktemp "$tools/bin/.$name.XXXXXX")
  if ! (cd "$tools" && GOWORK=off go build -o "$tmp" "$pkg") >&2; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$out"
  echo "$out"
}
