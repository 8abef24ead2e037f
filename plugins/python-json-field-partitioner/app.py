"""The component's entry point: componentize-py exports `PartitionerApi` from here."""

import json_field
from sluice_sdk import partitioner_api

PartitionerApi = partitioner_api(json_field.partition, init=json_field.init)
