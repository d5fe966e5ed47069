"""Running the scheduler's commands on a login node over SSH (issue 12).

`transport.ParamikoTransport` implements adapters/transport.py's Transport with
paramiko; `command.py` builds the remote command line (quoting, clean environment);
`hostkeys.py` verifies the login node against known_hosts. Nothing here knows Slurm: the
same argv the local transport runs is run remotely.
"""
