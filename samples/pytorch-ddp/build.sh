#!/usr/bin/env bash
# Builds the PyTorch sample's image with no container registry:
#   samples/pytorch-ddp/build.sh          (prints the image's tag, mlkube/pytorch-ddp:dev, on stdout)
#
# Two images, both in Docker's own image store:
#   mlkube/torch:bookworm       Debian bookworm (debootstrap --variant=minbase) with Debian's own
#                               python3-torch (CPU) and what it depends on; no docs, man pages,
#                               locales or apt lists. Its label mlkube.io/packages is a key of the
#                               package versions it was built from: python3-torch and everything it
#                               depends on, as this machine's apt sources resolve them in bookworm.
#   mlkube/pytorch-ddp:dev      that image, train.py and progress.py. Its label mlkube.io/recipe is
#                               a key of the package key, train.py, progress.py and this script.
# A run whose keys match the images' labels does nothing else (about a second: apt-cache reads the
# machine's package lists). A changed train.py or progress.py rebuilds only the small second image.
#
# Needs root on a Debian machine for debootstrap (installed with apt-get when missing) and a Docker
# engine (hack/docker.sh start). The packages come from the Debian mirror this machine's apt is
# configured with.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/hack/progress.sh"
trap progress_stop EXIT

suite=bookworm
base=mlkube/torch:$suite
tag=${1:-mlkube/pytorch-ddp:dev}

die() { echo "pytorch-ddp: $*" >&2; exit 1; }

command -v apt-cache >/dev/null || die "apt-cache is missing: this script needs a Debian machine (its apt sources give the packages)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run hack/docker.sh start on a machine without one)"

# versions PACKAGE: "name version" of PACKAGE and every package it depends on (Depends and
# Pre-Depends, every alternative; no Recommends), as they are in the suite itself (not its
# -updates or -security, which debootstrap does not read).
versions() {
  local names
  names=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
            --no-replaces --no-enhances "$1" | grep -E '^[a-z0-9]' | LC_ALL=C sort -u)
  # madison: " name | version | URI suite/component arch Packages"
  # shellcheck disable=SC2086
  apt-cache madison $names | awk -F' *[|] *' -v s=" $suite/" 'index($3, s) {gsub(/ /, "", $1); print $1, $2}' | LC_ALL=C sort -u
}

resolved=$(versions python3-torch)
if ! grep -q '^python3-torch ' <<<"$resolved"; then
  # A fresh machine (a container's Debian, CI's) may have no package lists yet.
  [ "$(id -u)" = 0 ] || die "apt knows no python3-torch in $suite: run apt-get update"
  progress_start "apt-get update (this machine has no package lists)"
  apt-get update -qq
  progress_end
  resolved=$(versions python3-torch)
  grep -q '^python3-torch ' <<<"$resolved" || die "no python3-torch in $suite in this machine's apt sources (/etc/apt/sources.list.d)"
fi
torch_version=$(awk '$1 == "python3-torch" {print $2}' <<<"$resolved")
packages_key=$( (cat <<<"$resolved"; sed -n '/^# base image: begin/,/^# base image: end/p' "$0") | sha256sum | cut -c1-16)
recipe=$( (echo "$packages_key"; cat "$0" "$here/train.py" "$here/progress.py") | sha256sum | cut -c1-16)

label() { docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
if [ "$(label "$tag" mlkube.io/recipe)" = "$recipe" ]; then
  echo "pytorch-ddp: $tag is up to date (python3-torch $torch_version, packages $packages_key, recipe $recipe)" >&2
  echo "$tag"
  exit 0
fi

# The images this run replaces: removed at the end if no tag names them and no container uses them.
replaced=()
for ref in "$base" "$tag"; do
  if id=$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null); then replaced+=("$id"); fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mlkube-pytorch-ddp.XXXXXX")
trap 'progress_stop; rm -rf "$work"' EXIT

# base image: begin (this part goes into the package key: a change here rebuilds the base image)
if [ "$(label "$base" mlkube.io/packages)" != "$packages_key" ]; then
  if ! command -v debootstrap >/dev/null; then
    [ "$(id -u)" = 0 ] || die "debootstrap is missing: apt-get install debootstrap"
    progress_start "installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    progress_end
  fi
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  # The mirror of the suite itself, as apt is configured (one-line or deb822 sources alike).
  mirror=$(apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 'Identifier: Packages' | awk -v s="$suite" '$1 == s {print $2; exit}')
  [ -n "$mirror" ] || die "apt has no source for $suite (/etc/apt/sources.list.d)"
  echo "pytorch-ddp: python3-torch $torch_version from this machine's Debian mirror, cached as $base (key $packages_key: the versions of the $(wc -l <<<"$resolved") packages it may depend on)" >&2
  progress_start "debootstrap --variant=minbase $suite with python3-torch"
  debootstrap --variant=minbase --include=python3-torch "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  progress_end
  # What a trainer never reads: docs, man pages, locales, apt's lists and archives, logs, the C++
  # test programs python3-torch depends on (libtorch-test), and what only a display or a video
  # card loads (Mesa's drivers, the LLVM and Z3 they link, Intel's media plugins), 185 MB: the
  # package pulls in OpenCV, Qt and FFmpeg, and `import torch` loads those, but not these.
  (cd "$work/rootfs" && rm -rf usr/share/doc usr/share/man usr/share/info usr/share/locale usr/share/lintian \
    var/cache/apt/*.bin var/cache/apt/archives/*.deb var/lib/apt/lists/* var/log/* usr/lib/libtorch-test \
    usr/lib/x86_64-linux-gnu/dri usr/lib/x86_64-linux-gnu/libLLVM-* usr/lib/x86_64-linux-gnu/libz3.so* \
    usr/lib/x86_64-linux-gnu/libmfxhw64.so* usr/lib/x86_64-linux-gnu/mfx)
  # torchrun of torch 1.13 on Python 3.11 fails before it starts anything ("'NoneType' object has
  # no attribute 'get'"): Python 3.11 no longer lists an IntFlag's zero value when iterating it, so
  # the default --redirects and --tee, "0", parse to None. PyTorch 2.0 fixed the loop; so does this.
  api=usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py
  grep -q '^            for s in Std:$' "$work/rootfs/$api" || die "$api changed: check whether torchrun still needs the fix here"
  sed -i 's/^            for s in Std:$/            for s in (Std.NONE, Std.OUT, Std.ERR, Std.ALL):/' "$work/rootfs/$api"
  chroot "$work/rootfs" python3 -m py_compile "/$api"
  progress_start "docker import $base"
  tar -C "$work/rootfs" -c . | docker import \
    -c 'ENV PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1' \
    -c "LABEL mlkube.io/packages=$packages_key mlkube.io/python3-torch=$torch_version" - "$base" >/dev/null
  progress_end
fi
# base image: end

progress_start "$tag: $base, train.py and progress.py"
c=$(docker create "$base" true)
mkdir "$work/app" && cp "$here/train.py" "$here/progress.py" "$work/app/"
docker cp "$work/app" "$c:/opt/pytorch-ddp"
docker commit -c 'CMD ["python3", "/opt/pytorch-ddp/train.py"]' -c "LABEL mlkube.io/recipe=$recipe" "$c" "$tag" >/dev/null
docker rm "$c" >/dev/null
progress_end
# The image trains: one rank alone, a few steps, a checkpoint (a few seconds).
progress_start "$tag: train.py alone, 3 steps"
smoke=$(docker run --rm -e MASTER_ADDR=127.0.0.1 -e MASTER_PORT=29500 -e WORLD_SIZE=1 -e RANK=0 -e STEPS=3 \
          -e CHECKPOINT_EVERY=1 -e CHECKPOINT_DIR=/tmp/checkpoints "$tag" 2>&1) \
  || { echo "$smoke" >&2; docker rmi "$tag" >/dev/null 2>&1 || true; die "$tag does not train (its output above)"; }
grep -q 'rank 0: done: 3 steps' <<<"$smoke" || { echo "$smoke" >&2; die "$tag ran train.py, which did not finish its 3 steps (its output above)"; }
progress_end
for id in "${replaced[@]}"; do
  if [ "$(docker image inspect -f '{{len .RepoTags}}' "$id" 2>/dev/null)" = 0 ]; then docker rmi "$id" >/dev/null 2>&1 || true; fi
done
echo "pytorch-ddp: built $tag (python3-torch $torch_version, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
echo "$tag"
