"""ironpool with Pulumi: two classes, a Volume, an Ignition Secret and two Machines booting the tiny image;
with `pulumi config set withSite true`, also a Debian 12 machine that cloud-init from this program
turns into a web server (`ironpool image build debian-12` makes the image).

Run it against `ironpool up` (which writes the client config this program finds on its own):

    pulumi stack init dev && pulumi up

or point it elsewhere with `pulumi config set ironpool:server https://...` and
`pulumi config set --secret ironpool:token ...`. `pulumi preview` shows in `*_planned_pool` where the
scheduler would put each new Machine; after `pulumi up`, `*_pool` says where each one landed.
"""

import json

import ironpool_pulumi as ironpool
import pulumi

config = pulumi.Config()

# Classes with the shapes of the host runtime's classes (a pool offers a class whose capabilities
# match one of its runtime's classes).
x_small = ironpool.MachineClass("demo-x-small", capabilities={"cpu": 1, "memory": "256Mi"})
small = ironpool.MachineClass("demo-small", capabilities={"cpu": 2, "memory": "1Gi"})
fast = ironpool.VolumeClass("demo-fast", capabilities={"tps": "100Mi", "iops": 1000},
                            resize_policy="ExpandOnly")
classes = {"demo-x-small": x_small, "demo-small": small}

data = ironpool.Volume("demo-data", volume_class=fast, size=config.get("dataSize") or "1Gi")
web_ignition = ironpool.Secret("demo-web-ignition",
                               data={"ignition.yaml": '{"ignition": {"version": "3.4.0"}}'})

web = ironpool.Machine(
    "demo-web",
    machine_class=classes[config.get("webClass") or "demo-x-small"],
    image="tiny",
    image_size="1Gi",
    volumes=[data],
    ignition_secret=web_ignition,
    power=config.get("webPower") or "On",
    labels={"app": "web"},
)
machines = {"web": web}

if config.get_bool("withApp") is not False:
    machines["app"] = ironpool.Machine(
        "demo-app",
        machine_class=x_small,
        image="tiny",
        # Inline Ignition: kept secret, stored in the Secret demo-app-ignition.
        ignition='{"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": "core"}]}}',
        labels={"app": "worker"},
    )

if config.get_bool("withSite"):
    # cloud-init user data written by the program: root's key (`pulumi config set sshKey "ssh-ed25519
    # ..."`), a page and a systemd service serving it, started on first boot. Nothing is downloaded.
    ssh_key = config.get("sshKey") or ""
    site_user_data = f"""#cloud-config
disable_root: false
ssh_authorized_keys: [{json.dumps(ssh_key)}]
write_files:
  - path: /srv/site/index.html
    content: "<h1>Declared by Pulumi, configured by cloud-init</h1>"
  - path: /etc/systemd/system/site.service
    content: |
      [Unit]
      Description=The Pulumi example's page
      [Service]
      ExecStart=/usr/bin/python3 -m http.server 8080 --directory /srv/site
      DynamicUser=yes
      [Install]
      WantedBy=multi-user.target
runcmd:
  - [systemctl, enable, --now, site.service]
"""
    standard = ironpool.MachineClass("demo-standard", capabilities={"cpu": 1, "memory": "512Mi"})
    machines["site"] = ironpool.Machine(
        "demo-site",
        machine_class=standard,
        image="debian-12",
        image_size="4Gi",
        ignition=site_user_data,  # cloud-init user data goes in as a NoCloud seed, Ignition through fw_cfg
        labels={"app": "site"},
    )

for key, machine in machines.items():
    pulumi.export(f"{key}_planned_pool", machine.planned_pool)
    pulumi.export(f"{key}_placement", machine.placement)
    pulumi.export(f"{key}_pool", machine.machine_pool)
    pulumi.export(f"{key}_state", machine.state)
    pulumi.export(f"{key}_ips", machine.ip_addresses)
pulumi.export("data_volume_pool", data.volume_pool)
