"""Cluster-structured partitions: clients with a known true cluster each.

    config = PartitionConfig(dataset="digits", partition="feature-skew")
    config.validate(dataset_info("digits"))        # ConfigError before any work
    partition = build_partition(load_dataset("digits"), config)
    clients = partition.materialize(dataset)       # list[ClientData], transforms applied
    partition.to_json()                            # what partition.json holds
"""
from .build import ClientData, ClientSpec, Partition, build_partition
from .config import WITHIN_SPLITS, PartitionConfig
from .plugin_check import ClusterStructure
from .structures import PARTITION_HELP, PARTITIONS

__all__ = [
    "ClientData",
    "ClientSpec",
    "ClusterStructure",
    "PARTITIONS",
    "PARTITION_HELP",
    "Partition",
    "PartitionConfig",
    "WITHIN_SPLITS",
    "build_partition",
]
