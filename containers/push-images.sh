#!/usr/bin/env bash
# Build the node image and the SageMaker image on it once, then push the SageMaker image to
# the ECR repository of every region given (the regional stack creates it). Called by
# `make push-images REGIONS="us-east-1 eu-west-1" [ACCOUNT=...] [REPOSITORY=...] [TAG=...]`.
set -euo pipefail

regions=${REGIONS:-}
repository=${REPOSITORY:-traingrid-horovod}
tag=${TAG:-latest}
if [[ -z "${regions// /}" ]]; then
  echo "push-images: name the regions, e.g. make push-images REGIONS=\"us-east-1 eu-west-1\"" \
       "(every region the campaign database lists: traingrid campaigns)" >&2
  exit 2
fi
for tool in docker aws; do
  command -v "$tool" >/dev/null || { echo "push-images: $tool is needed and not installed" >&2; exit 2; }
done
account=${ACCOUNT:-$(aws sts get-caller-identity --query Account --output text)}
here=$(cd "$(dirname "$0")" && pwd)

echo "push-images: building traingrid-mnp and ${repository}:${tag} once"
docker build --tag traingrid-mnp:latest "$here/mnp"
docker build --tag "${repository}:${tag}" --build-arg NODE_IMAGE=traingrid-mnp:latest \
  "$here/sagemaker"

set -- $regions
count=$#
index=0
for region in "$@"; do
  index=$((index + 1))
  registry="${account}.dkr.ecr.${region}.amazonaws.com"
  echo "push-images: [${index}/${count}] ${registry}/${repository}:${tag}"
  aws ecr get-login-password --region "$region" \
    | docker login --username AWS --password-stdin "$registry"
  docker tag "${repository}:${tag}" "${registry}/${repository}:${tag}"
  docker push "${registry}/${repository}:${tag}"
done
echo "push-images: pushed ${repository}:${tag} to ${count} region(s)"
