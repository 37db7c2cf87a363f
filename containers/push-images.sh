#!/usr/bin/env bash
# Build the node image and the SageMaker image on it once, both tagged with one version, then
# push the node image to the main stack's repository in its region (NodeImageRepository,
# traingrid-mnp) and the SageMaker image to the repository of every campaign region given
# (the regional stack creates those). Called by
# `make push-images HOME_REGION=us-east-1 [REGIONS="us-east-1 eu-west-1"] [TAG=] [ACCOUNT=]
# [NODE_REPOSITORY=] [REPOSITORY=]`; TAG is the project's version unless given.
set -euo pipefail

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
for tool in docker aws; do
  command -v "$tool" >/dev/null || problems+=("$tool is needed and not installed")
done
if ((${#problems[@]})); then
  for problem in "${problems[@]}"; do echo "push-images: $problem" >&2; done
  exit 2
fi
account=${ACCOUNT:-$(aws sts get-caller-identity --query Account --output text)}
here=$(cd "$(dirname "$0")" && pwd)

echo "push-images: building ${node_repository}:${tag} and ${repository}:${tag} once"
docker build --tag "${node_repository}:${tag}" "$here/mnp"
docker build --tag "${repository}:${tag}" --build-arg "NODE_IMAGE=${node_repository}:${tag}" \
  "$here/sagemaker"

# push IMAGE REGION: log in to the region's registry, tag the local image there, push it.
push() {
  local image=$1 region=$2
  local registry="${account}.dkr.ecr.${region}.amazonaws.com"
  aws ecr get-login-password --region "$region" \
    | docker login --username AWS --password-stdin "$registry"
  docker tag "$image" "${registry}/${image}"
  docker push "${registry}/${image}"
}

echo "push-images: node image ${account}.dkr.ecr.${home}.amazonaws.com/${node_repository}:${tag}"
push "${node_repository}:${tag}" "$home"

set -- $regions
count=$#
index=0
for region in "$@"; do
  index=$((index + 1))
  echo "push-images: [${index}/${count}] ${account}.dkr.ecr.${region}.amazonaws.com/${repository}:${tag}"
  push "${repository}:${tag}" "$region"
done
echo "push-images: pushed ${node_repository}:${tag} to ${home} and ${repository}:${tag} to ${count} region(s)"
