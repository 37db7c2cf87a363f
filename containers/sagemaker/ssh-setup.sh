#!/bin/sh
# Passwordless ssh between a SageMaker job's hosts, as SageMaker's training toolkit expects it:
# its MPI runner starts `/usr/sbin/sshd -D` (the default configuration) on every host, the
# workers log in to algo-1 and algo-1 to the workers as root, by key (paramiko, then
# mpirun's ssh and the toolkit's own), all without asking anything.
#
#   ssh-setup.sh [ROOT]    # the image's build runs it on /; the tests on a folder of their own
#
# The key pair and the host key are made here, once per image build, and every host of every
# job of this image shares them: SageMaker gives the hosts nothing secret in common to make
# them from at start, and each job runs in a network of its own, which nothing outside the
# job's hosts reaches (the region jobs have no VpcConfig), as AWS's own training images do.
# Unlike them, the host key is checked: the known host is this key under the names SageMaker
# gives hosts (algo-*), so an ssh that reached anything else would refuse it. Only the key
# logs in (no password, no PAM authentication); PAM's session stays, so that pam_env reads
# /etc/environment, where each worker's toolkit writes the job's environment for the ranks.
set -eu
root="${1:-}"
ssh_dir="$root/root/.ssh"
etc="$root/etc/ssh"

install -d -m 700 "$ssh_dir"
install -d -m 755 "$etc"
rm -f "$etc"/ssh_host_* "$ssh_dir"/id_*
ssh-keygen -q -t ed25519 -N '' -C traingrid-sagemaker-host -f "$etc/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C traingrid-sagemaker-job -f "$ssh_dir/id_ed25519"
install -m 600 "$ssh_dir/id_ed25519.pub" "$ssh_dir/authorized_keys"
printf 'algo-* %s\n' "$(cut -d' ' -f1,2 "$etc/ssh_host_ed25519_key.pub")" > "$ssh_dir/known_hosts"
cat > "$ssh_dir/config" <<'EOF'
Host *
  IdentityFile /root/.ssh/id_ed25519
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking yes
  UserKnownHostsFile /root/.ssh/known_hosts
EOF
chmod 600 "$ssh_dir/config" "$ssh_dir/known_hosts"

cat > "$etc/sshd_config" <<'EOF'
# Written by ssh-setup.sh (containers/sagemaker): the toolkit runs /usr/sbin/sshd -D with it.
Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile .ssh/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
PermitRootLogin prohibit-password
UsePAM yes
StrictModes yes
PermitUserEnvironment no
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitTunnel no
LogLevel INFO
EOF

# A container may not set its login uid: pam_loginuid would end every ssh session at once.
if [ -f "$root/etc/pam.d/sshd" ]; then
  sed -i 's/^session\s*required\s*pam_loginuid\.so/session optional pam_loginuid.so/' \
    "$root/etc/pam.d/sshd"
fi
