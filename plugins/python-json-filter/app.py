"""The component's entry point: componentize-py exports `FilterApi` from here."""

import json_filter
from sluice_sdk import filter_api

FilterApi = filter_api(json_filter.keep, init=json_filter.Predicate)
