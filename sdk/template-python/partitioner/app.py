"""The component's entry point: componentize-py exports `PartitionerApi` from here."""

import {{module}}
from sluice_sdk import partitioner_api

PartitionerApi = partitioner_api({{module}}.partition)
