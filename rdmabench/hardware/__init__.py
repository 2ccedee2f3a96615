"""What the machine is and allows: GPUs, PCIe/NVLink/NIC/NUMA topology, link limits, path checks, memlock, doctor."""
