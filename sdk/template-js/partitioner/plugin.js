// The component's entry point: componentize-js exports `partitionerApi` from here.
import { log } from 'sluice:plugin/host@0.1.0';
import { partitionerApi as exportPartitioner, setLog } from '{{sdk_path}}/js/sluice-sdk.js';
import { partition } from './{{name}}.js';

setLog(log); // sluice-sdk.js's log() writes to the broker's log for this plugin
export const partitionerApi = exportPartitioner(partition);
