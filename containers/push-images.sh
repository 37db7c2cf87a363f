#!/usr/bin/env bash
# Build the node image and the SageMaker image on it once, both tagged with one version, then
# push the node image to the main stack's repository in its region (NodeImageRepository,
# traingrid-mnp) and the SageMaker image to the repository of every campaign region given
# (the regional stack creates those). Called by
# `make push-images HOME_REGION=us-east-1 [REGIONS="us-east-1 eu-west-1"] [TAG=] [ACCOUNT=]
# [NODE_REPOSITORY=] [REPOSITORY=]`; TAG is the project's version unless given. Both are built
# for linux/amd64 whatever this machine is; a tag a repository already holds with this build's
# content is skipped (a re-run succeeds), and one holding another image stops it before anything
# is pushed (tags are immutable).
set -euo pipefail
shopt -s inherit_errexit  # a failing aws call inside $(...) stops the script too

home=${HOME_REGION:-}
regions=${REGIONS:-}
node_repository=${NODE_REPOSITORY:-traingrid-mnp}
repository=${REPOSITORY:-traingrid-sagemaker}
tag=${TAG:-}

# Every problem at once, before anything is built.
problems=()
if [[ -z "${home// /}" ]]; then
  problems+=("name the main stack's region, e.g. HOME_REGION=us-east-1 (its ${node_repository} repository runs the jobs' node image)")
fi
if [[ -z "$tag" ]]; then
  problems+=("name the version tag, e.g. TAG=0.1.0 (the stack's NodeImageTag)")
elif [[ "$tag" == latest ]]; then
  problems+=("TAG may not be latest: the node image repository keeps immutable version tags")
fi
for tool in docker aws python3; do
  command -v "$tool" >/dev/null || problems+=("$tool is needed and not installed")
done
if ((${#problems[@]})); then
  for problem in "${problems[@]}"; do echo "push-images: $problem" >&2; done
  exit 2
fi
account=${ACCOUNT:-$(aws sts get-caller-identity --query Account --output text)}
here=$(cd "$(dirname "$0")" && pwd)

# Both images for the x86_64 instances they run on, whatever this machine is (an arm64 laptop
# builds them through emulation), each one single-platform manifest: no image index, whose
# untagged children a lifecycle rule on untagged images could select (BuildKit's provenance
# attestation would add one).
platform=linux/amd64
echo "push-images: building ${node_repository}:${tag} and ${repository}:${tag} once (${platform})"
docker build --platform "$platform" --provenance=false --tag "${node_repository}:${tag}" \
  "$here/mnp"
docker build --platform "$platform" --provenance=false --tag "${repository}:${tag}" \
  --build-arg "NODE_IMAGE=${node_repository}:${tag}" "$here/sagemaker"

# decide IMAGE REPOSITORY REGION: push, skip or conflict, and why (push-decision.py), from the
# tag as the region's repository holds it and the local image.
decide() {
  local image=$1 name=$2 region=$3 answer
  answer=$(aws ecr batch-get-image --region "$region" --repository-name "$name" \
    --image-ids "imageTag=${tag}" --output json)
  printf '%s' "$answer" | python3 "$here/push-decision.py" \
    "$(docker image inspect --format '{{.Id}}' "$image")" \
    "$(docker image inspect --format '{{join .RepoDigests " "}}' "$image")"
}

# push IMAGE REGION: log in to the region's registry, tag the local image there, push it.
push() {
  local image=$1 region=$2
  local registry="${account}.dkr.ecr.${region}.amazonaws.com"
  aws ecr get-login-password --region "$region" \
    | docker login --username AWS --password-stdin "$registry"
  docker tag "$image" "${registry}/${image}"
  docker push "${registry}/${image}"
}

# Every destination is looked at before anything is pushed; a tag that holds another image
# anywhere stops the run with every such place named.
set -- $regions
count=$#
destinations=("${node_repository}:${tag}@${home}")
for region in "$@"; do destinations+=("${repository}:${tag}@${region}"); done
decisions=()
conflicts=()
for destination in "${destinations[@]}"; do
  image=${destination%@*}
  region=${destination##*@}
  line=$(decide "$image" "${image%%:*}" "$region")
  decision=${line%%$'\t'*}
  why=${line#*$'\t'}
  decisions+=("$decision")
  if [[ "$decision" == conflict ]]; then
    conflicts+=("${account}.dkr.ecr.${region}.amazonaws.com/${image}: ${why}")
  elif [[ "$decision" != push && "$decision" != skip ]]; then
    conflicts+=("${account}.dkr.ecr.${region}.amazonaws.com/${image}: no decision (${why:-?})")
  fi
done
if ((${#conflicts[@]})); then
  for conflict in "${conflicts[@]}"; do echo "push-images: $conflict" >&2; done
  exit 1
fi

pushed=0
for index in "${!destinations[@]}"; do
  destination=${destinations[$index]}
  image=${destination%@*}
  region=${destination##*@}
  where="${account}.dkr.ecr.${region}.amazonaws.com/${image}"
  if ((index == 0)); then what="node image"; else what="[${index}/${count}]"; fi
  if [[ "${decisions[$index]}" == skip ]]; then
    echo "push-images: ${what} ${where}: already there, skipped"
  else
    echo "push-images: ${what} ${where}"
    push "$image" "$region"
    pushed=$((pushed + 1))
  fi
done
echo "push-images: ${node_repository}:${tag} in ${home} and ${repository}:${tag} in ${count} region(s): ${pushed} pushed, $(( ${#destinations[@]} - pushed )) already there"
