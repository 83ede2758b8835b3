#!/usr/bin/env bash
# Builds a kind node image with no container registry:
#   clusters/nodeimage/build.sh [TAG]      (default mlkube/kind-node:<kubernetes version>)
#
# The image is Debian bookworm (debootstrap from this machine's own apt mirror) with Debian's
# containerd, runc and CNI plugins, kind's base files and entrypoint (from the kind Go module),
# and Kubernetes built from Go modules (hack/build-kubernetes.sh): kubeadm, kubelet and kubectl
# on the node, the control-plane images (apiserver, controller-manager, scheduler, proxy, etcd,
# CoreDNS, pause) preloaded into the node's containerd. kindnet cannot be had offline. In its
# place: for one node, a static bridge CNI config (networking.disableDefaultCNI); for several,
# flannel (host-gw), built from Go modules, preloaded, and installed by kind as the node image's
# default CNI manifest (files/kind/manifests/default-cni.yaml). devctl up --workers hides the
# static config from multi-node clusters.
#
# Docker's image store is the cache: an image whose recipe label matches this recipe is reused,
# and the Debian base is kept as its own image, so a rebuild after a change here is quick.
# Progress goes to stderr (each long step with its duration, and a line every 15 s while it
# runs); stdout is the image's tag alone.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/hack/progress.sh"
here="$root/clusters/nodeimage"
pinned() { awk -v m="$2" '$1==m {print $2; exit}' "$root/$1"; }
k8s=$(pinned hack/kubernetes/go.mod k8s.io/kubernetes)
kind_version=$(pinned go.mod sigs.k8s.io/kind)
tag=${1:-mlkube/kind-node:$k8s}

step() { printf '\n== %s\n' "$*" >&2; }
die() { echo "nodeimage: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker engine answers (run hack/docker.sh start on a machine without one)"

# kind's base files and entrypoint ship in its Go module. Download first: `go list -m` prints an
# empty Dir for a module not yet in the module cache (a fresh machine's).
kindfiles=$(cd "$root" && go mod download sigs.k8s.io/kind && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)/images/base/files
[ -d "$kindfiles" ] || die "kind's base files not found at $kindfiles"

# Everything that shapes the image goes into the recipe hash, kind's files included.
# Each folder's files in their own sorted order: where the checkout and the module cache lie
# must not change the order, so that a fresh module cache (CI's first step) finds the same image.
recipe=$( (cat "$0"; for d in "$here/files" "$here/pause" "$kindfiles"; do (cd "$d" && find . -type f | LC_ALL=C sort | xargs cat); done; for d in "$root/hack/flannel" "$root/hack/flannel-cni"; do (cd "$d" && find . -type f | LC_ALL=C sort | xargs cat); done; cat "$root/hack/kubernetes/go.mod" "$root/hack/coredns/go.mod"; echo "$kind_version") | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "mlkube.io/recipe" }}' "$tag" 2>/dev/null || true)" = "$recipe" ]; then
  echo "nodeimage: $tag is up to date (recipe $recipe)" >&2
  echo "$tag"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mlkube-nodeimage.XXXXXX")
build_container=""
# The images this build replaces (older builds of the same tags): removed at the end when no
# tag names them any more and no container uses them (a cluster's node runs on its image).
replaced=()
replacing() { local id; if id=$(docker image inspect -f '{{.Id}}' "$1" 2>/dev/null); then replaced+=("$id"); fi; }
remove_replaced() {
  local id
  for id in "${replaced[@]}"; do
    if [ "$(docker image inspect -f '{{len .RepoTags}}' "$id" 2>/dev/null)" = 0 ]; then
      docker rmi "$id" >/dev/null 2>&1 || true
    fi
  done
}
cleanup() {
  progress_stop
  [ -n "$build_container" ] && docker rm -f "$build_container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step "Kubernetes $k8s programs (built from Go modules, cached)"
programs=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns flanneld flannel-cni)
mapfile -t paths < <("$root/hack/build-kubernetes.sh" "${programs[@]}")
[ "${#paths[@]}" -eq "${#programs[@]}" ] || die "building Kubernetes programs failed"
declare -A bin
for i in "${!programs[@]}"; do bin[${programs[$i]}]=${paths[$i]}; done
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/pause" ./clusters/nodeimage/pause)
bin[pause]=$work/pause

step "Debian base"
packages=systemd,systemd-sysv,dbus,iproute2,iptables,nftables,ebtables,conntrack,ethtool,socat,procps,ca-certificates,mount,util-linux,kmod,libseccomp2,containerd,runc,containernetworking-plugins,jq,bash
base="mlkube/node-base:bookworm-$(echo "$packages" | sha256sum | cut -c1-12)"
if ! docker image inspect "$base" >/dev/null 2>&1; then
  if ! command -v debootstrap >/dev/null; then
    # A fresh test machine has none; Debian's package is all it takes.
    [ "$(id -u)" = 0 ] || die "debootstrap is missing: apt-get install debootstrap"
    progress_start "installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    progress_end
  fi
  # This machine's own Debian mirror, as apt is configured.
  mirror=$(grep -hoE '^(URIs:|deb) +[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v -- '-security' | grep -i debian | head -n 1 || true)
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt sources"
  echo "  debootstrap bookworm from $mirror (a few minutes; cached as $base)" >&2
  progress_start "debootstrap bookworm"
  debootstrap --variant=minbase --include="$packages" bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  progress_end
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  progress_start "docker import $base"
  tar -C "$work/rootfs" -c . | docker import -c 'ENV container=docker' - "$base" >/dev/null
  progress_end
  rm -rf "$work/rootfs"
fi
# kube-proxy and flannel need the base's iptables, nftables, conntrack, shell and openssl, not its
# container runtime, CNI plugins, docs or locales. Every node unpacks their base layer before it
# runs them (the node image holds it packed), so it is kept small: 327 MB less these 220 MB.
slim="mlkube/node-base-slim:${base#*:}"
if ! docker image inspect "$slim" >/dev/null 2>&1; then
  progress_start "$slim"
  mkdir "$work/slim"
  c=$(docker create "$base" true)
  docker export "$c" | tar -C "$work/slim" -x
  docker rm "$c" >/dev/null
  (cd "$work/slim" && rm -rf usr/bin/containerd* usr/bin/ctr usr/sbin/runc usr/lib/cni usr/share/locale usr/share/doc usr/share/man usr/share/info)
  tar -C "$work/slim" -c . | docker import -c 'ENV container=docker' - "$slim" >/dev/null
  rm -rf "$work/slim"
  progress_end
fi

step "Control-plane images"
mapfile -t refs < <("${bin[kubeadm]}" config images list --kubernetes-version "$k8s" 2>/dev/null)
[ "${#refs[@]}" -gt 0 ] || die "kubeadm config images list gave nothing"
path_env='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
for ref in "${refs[@]}"; do
  progress_start "$ref"
  replacing "$ref"
  name=${ref##*/}; name=${name%%:*}
  case $name in
    kube-proxy)
      # kube-proxy programs iptables: it needs the (slim) Debian base, not a bare binary.
      c=$(docker create --entrypoint /usr/local/bin/kube-proxy "$slim")
      docker cp "${bin[kube-proxy]}" "$c:/usr/local/bin/kube-proxy"
      docker commit -c "$path_env" -c 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' "$c" "$ref" >/dev/null
      docker rm "$c" >/dev/null ;;
    etcd|kube-apiserver|kube-controller-manager|kube-scheduler)
      mkdir -p "$work/img-$name/usr/local/bin"
      cp "${bin[$name]}" "$work/img-$name/usr/local/bin/$name"
      tar -C "$work/img-$name" -c . | docker import -c "$path_env" -c "ENTRYPOINT [\"/usr/local/bin/$name\"]" - "$ref" >/dev/null ;;
    coredns|pause)
      mkdir -p "$work/img-$name"
      cp "${bin[$name]}" "$work/img-$name/$name"
      tar -C "$work/img-$name" -c . | docker import -c "ENTRYPOINT [\"/$name\"]" - "$ref" >/dev/null ;;
    *) die "kubeadm expects an image this builder does not make: $ref" ;;
  esac
  progress_end
done
# flannel sets up iptables and nftables rules: the slim Debian base, as kube-proxy. The default CNI
# manifest names this tag.
flannel_ref="mlkube/flannel:$(pinned hack/flannel/go.mod github.com/flannel-io/flannel)"
progress_start "$flannel_ref"
replacing "$flannel_ref"
c=$(docker create --entrypoint /usr/local/bin/flanneld "$slim")
docker cp "${bin[flanneld]}" "$c:/usr/local/bin/flanneld"
docker commit -c "$path_env" -c 'ENTRYPOINT ["/usr/local/bin/flanneld"]' "$c" "$flannel_ref" >/dev/null
docker rm "$c" >/dev/null
progress_end
grep -q "image: $flannel_ref" "$here/files/kind/manifests/default-cni.yaml" || die "default-cni.yaml does not name $flannel_ref"
progress_start "docker save of the control-plane images and flannel"
docker save -o "$work/images.tar" "${refs[@]}" "$flannel_ref"
progress_end

step "Node image $tag"
build_container=$(docker run -d --entrypoint sleep --security-opt seccomp=unconfined "$base" infinity)
node_exec() { docker exec "$build_container" "$@"; }
progress_start "copying kind's files, ours, the programs and the images into the build container"
# kind's files first, then ours over them.
docker cp "$kindfiles/." "$build_container:/"
docker cp "$here/files/." "$build_container:/"
for p in kubeadm kubelet kubectl; do docker cp "${bin[$p]}" "$build_container:/usr/bin/$p"; done
# Beside Debian's plugins, so that it is linked into /opt/cni/bin with them.
docker cp "${bin[flannel-cni]}" "$build_container:/usr/lib/cni/flannel"
docker cp "$work/images.tar" "$build_container:/kind/images.tar"
progress_end
progress_start "setting up the node, the control-plane images into its containerd"
node_exec bash -euo pipefail -c "
  chmod 755 /usr/local/bin/* /kind/bin/* /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl
  # kind's units and scripts expect the upstream install locations.
  ln -sf /usr/bin/containerd /usr/local/bin/containerd
  mkdir -p /usr/local/sbin /opt/cni/bin /etc/kubernetes/manifests
  ln -sf /usr/sbin/runc /usr/local/sbin/runc
  for p in /usr/lib/cni/*; do ln -sf \"\$p\" /opt/cni/bin/; done
  echo -n $k8s > /kind/version
  # As kind's base image does: only the units kind wants run under the node's systemd.
  find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
        /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
        /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  rm -f /etc/systemd/system/containerd-fuse-overlayfs.service
  echo ReadKMsg=no >> /etc/systemd/journald.conf
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  systemctl mask systemd-binfmt.service >/dev/null 2>&1
  ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}' \
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json
  # Preload the control-plane images, as kind's own builder does: into the content store,
  # pinned, unpacked when first used.
  (containerd > /tmp/containerd.log 2>&1 &)
  for i in \$(seq 1 50); do [ -S /run/containerd/containerd.sock ] && break; sleep 0.2; done
  ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /kind/images.tar >/dev/null
  pkill containerd
  rm -f /kind/images.tar /tmp/containerd.log
"
progress_end
# No STOPSIGNAL (kind's image asks systemd to halt with SIGRTMIN+3): Docker 20.10 cannot set it
# on commit, and kind removes its nodes with a kill, never a stop.
progress_start "docker commit $tag"
replacing "$tag"
docker commit \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' -c 'CMD []' \
  -c 'ENV container=docker' \
  -c "LABEL mlkube.io/recipe=$recipe mlkube.io/kubernetes-version=$k8s" \
  "$build_container" "$tag" >/dev/null
progress_end
remove_replaced
echo "nodeimage: built $tag (recipe $recipe)" >&2
echo "$tag"
