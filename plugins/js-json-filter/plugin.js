// The component's entry point: componentize-js exports `filterApi` from here.
import { log } from 'sluice:plugin/host@0.1.0';
import { filterApi as exportFilter, setLog } from '../../sdk/js/sluice-sdk.js';
import { init, keep } from './json-filter.js';

setLog(log);
export const filterApi = exportFilter(keep, init);
