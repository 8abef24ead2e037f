"""The component's entry point: componentize-py exports `TransformApi` from here."""

import {{module}}
from sluice_sdk import transform_api

TransformApi = transform_api({{module}}.transform)
