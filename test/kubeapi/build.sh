#!/bin/sh
# Builds Kubernetes' API server for test/kubeapi into the test cache, once: make kubeapi.
# The build module (build/go.mod) holds k8s.io/kubernetes and its staging modules at
# their published release, so none of it enters gorping's go.mod. About 7 minutes on 2
# idle cores, 170 MB; niced, as it shares the machine with the rest of make test.
set -eu
cd "$(dirname "$0")/build"
version=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[^ ]*\).*/\1/p' go.mod)
cache=${GORPING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gorping}
out="$cache/kubeapi/kube-apiserver-$version"
if [ -x "$out" ]; then
	echo "kube-apiserver $version: $out (cached)"
	exit 0
fi
mkdir -p "$cache/kubeapi"
echo "building kube-apiserver $version into $out (once; about 7 minutes on 2 cores)"
CGO_ENABLED=0 nice -n 15 ${GO:-go} build -trimpath -ldflags '-s -w' -o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out.tmp" "$out"
echo "kube-apiserver $version: $out"
