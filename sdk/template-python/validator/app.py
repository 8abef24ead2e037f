"""The component's entry point: componentize-py exports `ValidatorApi` from here."""

import {{module}}
from sluice_sdk import validator_api

ValidatorApi = validator_api({{module}}.validate)
