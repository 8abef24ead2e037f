// The component's entry point: componentize-js exports `filterApi` from here.
import { log } from 'sluice:plugin/host@0.1.0';
import { filterApi as exportFilter, setLog } from '{{sdk_path}}/js/sluice-sdk.js';
import { keep } from './{{name}}.js';

setLog(log); // sluice-sdk.js's log() writes to the broker's log for this plugin
export const filterApi = exportFilter(keep);
