#!/bin/sh
# Installs glslang 13+ and SPIR-V Tools from Debian 13 (trixie) beside Debian 12's for
# the shaders that use VK_KHR_cooperative_matrix (GL_KHR_cooperative_matrix needs
# glslang 13+; bookworm has 12). The trixie packages are unpacked, not installed: they
# run on their own glibc and libstdc++ (from the same release) through that glibc's
# dynamic loader, so the system's libraries are untouched. Writes the commands
# glslang-khr and spirv-val-khr into BIN (default /usr/local/bin), the files into
# DIR (default /opt/lumus-glslang-khr). Run as root by `make deps`.
set -eu
DIR=${DIR:-/opt/lumus-glslang-khr}
BIN=${BIN:-/usr/local/bin}
SUITE=${SUITE:-trixie}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" > "$tmp/sources.list"
APT="-o Dir::Etc::SourceList=$tmp/sources.list -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp/cache -o Debug::NoLocking=1
     -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get $APT update -qq
cd "$tmp/debs"
# shellcheck disable=SC2086
apt-get $APT download glslang-tools spirv-tools libc6 libstdc++6 libgcc-s1 >/dev/null
rm -rf "$DIR.new"
mkdir -p "$DIR.new"
for d in ./*.deb; do dpkg-deb -x "$d" "$DIR.new"; done
rm -rf "$DIR"
mv "$DIR.new" "$DIR"
lib="$DIR/usr/lib/x86_64-linux-gnu"
for tool in glslang:glslang-khr spirv-val:spirv-val-khr; do
  cat > "$BIN/${tool#*:}" <<WRAP
#!/bin/sh
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$DIR/usr/bin/${tool%%:*}" "\$@"
WRAP
  chmod 755 "$BIN/${tool#*:}"
done
"$BIN/glslang-khr" --version | head -n 1
