#!/usr/bin/env bash
# Build (or reuse) llama.cpp's llama-server from the llama-cpp-python sdist on PyPI, which
# vendors llama.cpp. Only the server target is built. The result is cached outside the
# checkout, keyed by the sdist version, so a second run costs nothing.
# Prints the path of the binary on its last line.
#   usage: ci/build-llama-server.sh [VERSION]       (default below; SPECPERF_CACHE overrides the cache root)
set -euo pipefail
version="${1:-${SPECPERF_LLAMA_CPP_PYTHON:-0.3.36}}"
cache="${SPECPERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specperf}/llama-server-$version"
binary="$cache/build/bin/llama-server"
if [ -x "$binary" ] && "$binary" --version >/dev/null 2>&1; then
  echo "$binary"
  exit 0
fi
mkdir -p "$cache"
work="$(mktemp -d "$cache/tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "building llama-server from llama-cpp-python $version (about 6 min on 2 cores) in $cache" >&2
python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work" >&2
tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
rm -rf "$cache/build" "$cache/gguf-py"
cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
cmake --build "$cache/build" --target llama-server -j"$(nproc)" >&2
# keep the matching gguf writer beside the binary (the models are written with it)
cp -r "$src/gguf-py" "$cache/gguf-py"
"$binary" --version >&2
echo "$binary"
