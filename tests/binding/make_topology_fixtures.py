#!/usr/bin/env python3
"""Writes the hwloc XML topologies the binding tests run against into OUT_DIR.

The CPU side comes from hwloc itself (lstopo-no-graphics -i "<synthetic>" --of xml), so it is
always a topology hwloc accepts; the I/O side (host bridges, PCIe switches, GPUs, NICs) is
added here, shaped like the machines hyrun targets. Each fixture's expected bindings are
written down in tests/binding/*_test.cpp; change both together.

Usage: make_topology_fixtures.py OUT_DIR          write every fixture
       make_topology_fixtures.py --check OUT_DIR  also load each one with lstopo-no-graphics
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

NVIDIA_H100 = "0302 [10de:2330] [10de:16c1] a1"
CONNECTX7 = "0207 [15b3:1021] [15b3:0041] 00"
PCIE_SWITCH_PORT = "0604 [1000:c030] [0000:0000] 00"


class Builder:
    """Adds I/O objects under the packages of a synthetic CPU topology."""

    def __init__(self, synthetic):
        xml = subprocess.run(["lstopo-no-graphics", "-i", synthetic, "--of", "xml", "-"],
                             check=True, capture_output=True, text=True).stdout
        self.root = ET.fromstring(xml)
        machine = self.root.find("object")
        self.packages = [o for o in machine.iter("object") if o.get("type") == "Package"]
        self.gp = 100000
        self.gpu_count = 0

    def _obj(self, parent, **attrs):
        self.gp += 1
        attrs["gp_index"] = str(self.gp)
        return ET.SubElement(parent, "object", {k: str(v) for k, v in attrs.items()})

    @staticmethod
    def _info(e, name, value):
        ET.SubElement(e, "info", {"name": name, "value": str(value)})

    def host_bridge(self, package, first_bus, last_bus):
        return self._obj(self.packages[package], type="Bridge", bridge_type="0-1", depth="0",
                         bridge_pci=f"0000:[{first_bus:02x}-{last_bus:02x}]")

    def switch(self, parent, bus, first_bus, last_bus, depth=1):
        """A PCIe switch: its upstream port; devices go under downstream() ports."""
        return self._obj(parent, type="Bridge", bridge_type="1-1", depth=str(depth),
                         bridge_pci=f"0000:[{first_bus:02x}-{last_bus:02x}]",
                         pci_busid=f"0000:{bus:02x}:00.0", pci_type=PCIE_SWITCH_PORT,
                         pci_link_speed="31.507692")

    def downstream(self, switch, port, bus):
        return self._obj(switch, type="Bridge", bridge_type="1-1", depth="2",
                         bridge_pci=f"0000:[{bus:02x}-{bus:02x}]",
                         pci_busid=f"0000:{bus - 1:02x}:{port:02x}.0", pci_type=PCIE_SWITCH_PORT,
                         pci_link_speed="31.507692")

    def gpu(self, parent, bus, osdevs, uuid):
        p = self._obj(parent, type="PCIDev", pci_busid=f"0000:{bus:02x}:00.0", pci_type=NVIDIA_H100,
                      pci_link_speed="31.507692")
        self._info(p, "PCIVendor", "NVIDIA Corporation")
        self._info(p, "PCIDevice", "GH100 [H100 SXM5 80GB]")
        if osdevs:
            n = self.gpu_count
            c = self._obj(p, type="OSDev", name=f"cuda{n}", subtype="CUDA", osdev_type="5")
            self._info(c, "CoProcType", "CUDA")
            v = self._obj(p, type="OSDev", name=f"nvml{n}", subtype="NVML", osdev_type="1")
            self._info(v, "NVIDIAUUID", uuid)
        if uuid and not osdevs:
            self._info(p, "GPUUUID", uuid)
        self.gpu_count += 1
        return p

    def nic(self, parent, bus, name, ports):
        """ports: None = no port information; else {port: state} (4 = ACTIVE, 1 = DOWN)."""
        p = self._obj(parent, type="PCIDev", pci_busid=f"0000:{bus:02x}:00.0", pci_type=CONNECTX7,
                      pci_link_speed="31.507692")
        self._info(p, "PCIVendor", "Mellanox Technologies")
        self._info(p, "PCIDevice", "MT2910 Family [ConnectX-7]")
        o = self._obj(p, type="OSDev", name=name, subtype="OpenFabrics", osdev_type="3")
        self._info(o, "NodeGUID", f"a088:c203:00{bus:02x}:0000")
        for port, state in (ports or {}).items():
            self._info(o, f"Port{port}State", state)
            self._info(o, f"Port{port}LID", "0")
        net = self._obj(p, type="OSDev", name=f"ib{name.split('_')[-1]}", osdev_type="2")
        self._info(net, "Port", "1")
        return p

    def write(self, path):
        body = ET.tostring(self.root, encoding="unicode")
        with open(path, "w", encoding="utf-8") as f:
            # The DOCTYPE keeps lstopo from warning; hwloc itself does not need it.
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
            f.write(body + "\n")


def uuid_of(i):
    return f"GPU-{0x5a000000 + i * 0x111:08x}-1c2d-3e4f-5a6b-{i:012x}"


def ht_synthetic(packages, cores, pus):
    """Synthetic string whose PU OS indexes follow Linux x86 numbering: the second
    hyperthread of core c is c + total_cores, not c + 1."""
    total = packages * cores
    if pus == 1:
        return f"pack:{packages} numa:1 l3:1 core:{cores} pu:1"
    indexes = ",".join(f"{c + t * total}" for c in range(total) for t in range(pus))
    return f"pack:{packages} numa:1 l3:1 core:{cores} pu:{pus}(indexes={indexes})"


# DGX-H100-like: 2 x 56 cores with HT; 8 GPUs, each behind its own PCIe switch together
# with its compute NIC; 2 storage NICs on separate host bridges.
DGX_GPU_BUSES = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb]
DGX_COMPUTE_NICS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


def dgx(path, osdevs, port_info):
    b = Builder(ht_synthetic(2, 56, 2))
    for pkg in range(2):
        hb = b.host_bridge(pkg, 0x10 + 0x80 * pkg, 0x6f + 0x80 * pkg)
        for k in range(4):
            i = pkg * 4 + k
            bus = DGX_GPU_BUSES[i]
            sw = b.switch(hb, bus - 3, bus - 2, bus + 1)
            b.gpu(b.downstream(sw, 0, bus), bus, osdevs, uuid_of(i) if osdevs or port_info else None)
            b.nic(b.downstream(sw, 1, bus + 1), bus + 1, DGX_COMPUTE_NICS[i], {1: 4} if port_info else None)
        storage_bus = 0x70 + 0x80 * pkg
        shb = b.host_bridge(pkg, storage_bus, storage_bus + 0x0f)
        b.nic(shb, storage_bus + 1, f"mlx5_{1 + pkg}", {1: 4} if port_info else None)
    b.write(path)


# One package, 4 GPUs; two switches each holding 2 GPUs and 1 NIC (mlx5_0 is active on port 2).
def shared_nic(path):
    b = Builder(ht_synthetic(1, 16, 2))
    hb = b.host_bridge(0, 0x10, 0x3f)
    for s, (nic, ports) in enumerate([("mlx5_0", {1: 1, 2: 4}), ("mlx5_1", {1: 4})]):
        base = 0x12 + 0x10 * s
        sw = b.switch(hb, base - 1, base, base + 3)
        b.gpu(b.downstream(sw, 0, base + 1), base + 1, False, uuid_of(2 * s))
        b.gpu(b.downstream(sw, 1, base + 2), base + 2, False, uuid_of(2 * s + 1))
        b.nic(b.downstream(sw, 2, base + 3), base + 3, nic, ports)
    b.write(path)


# Grace-like: 2 sockets x 72 cores, no HT, one NUMA node per socket; 4 GPUs, each on its
# own host bridge (root port) with a NIC beside it.
def grace(path):
    b = Builder(ht_synthetic(2, 72, 1))
    for i in range(4):
        pkg = i // 2
        base = 0x01 + 0x40 * i
        hb = b.host_bridge(pkg, base, base + 0x3f)
        b.gpu(hb, base + 1, False, None)
        b.nic(hb, base + 2, f"mlx5_{i}", {1: 4})
    b.write(path)


# 2 sockets with HT, 4 GPUs on host bridges, no RDMA NIC at all.
def no_nic(path):
    b = Builder(ht_synthetic(2, 8, 2))
    for pkg in range(2):
        hb = b.host_bridge(pkg, 0x10 + 0x40 * pkg, 0x4f + 0x40 * pkg)
        for k in range(2):
            b.gpu(hb, 0x11 + 0x40 * pkg + k, False, None)
    b.write(path)


# CPU-only: 2 sockets x 2 NUMA nodes x 4 cores with HT, one NIC per socket, no GPU.
def no_gpu(path):
    b = Builder("pack:2 numa:2 core:4 pu:2")
    for pkg in range(2):
        hb = b.host_bridge(pkg, 0x10 + 0x40 * pkg, 0x4f + 0x40 * pkg)
        b.nic(hb, 0x11 + 0x40 * pkg, f"mlx5_{pkg}", {1: 4})
    b.write(path)


FIXTURES = {
    "dgx-h100.xml": lambda p: dgx(p, osdevs=True, port_info=True),
    "dgx-h100-bare.xml": lambda p: dgx(p, osdevs=False, port_info=False),
    "shared-nic.xml": shared_nic,
    "grace.xml": grace,
    "no-nic.xml": no_nic,
    "no-gpu.xml": no_gpu,
}


def main(argv):
    check = "--check" in argv
    args = [a for a in argv[1:] if a != "--check"]
    if len(args) != 1:
        sys.exit(__doc__)
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    for name, make in FIXTURES.items():
        path = os.path.join(out_dir, name)
        make(path)
        if check:
            # hwloc must accept the file as it is, I/O objects included.
            text = subprocess.run(["lstopo-no-graphics", "-i", path, "--of", "console", "--whole-io"],
                                  check=True, capture_output=True, text=True).stdout
            if "PCI" not in text:
                sys.exit(f"{path}: hwloc shows no PCI device")
    print(f"wrote {len(FIXTURES)} topology fixtures to {out_dir}")


if __name__ == "__main__":
    main(sys.argv)
