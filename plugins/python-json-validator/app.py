"""The component's entry point: componentize-py exports `ValidatorApi` from here."""

import json_validator
from sluice_sdk import validator_api

ValidatorApi = validator_api(json_validator.validate, init=json_validator.Schema)
