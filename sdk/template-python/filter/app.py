"""The component's entry point: componentize-py exports `FilterApi` from here."""

import {{module}}
from sluice_sdk import filter_api

FilterApi = filter_api({{module}}.keep)
