// The component's entry point: componentize-js exports `transformApi` from here.
import { log } from 'sluice:plugin/host@0.1.0';
import { transformApi as exportTransform, setLog } from '{{sdk_path}}/js/sluice-sdk.js';
import { transform } from './{{name}}.js';

setLog(log); // sluice-sdk.js's log() writes to the broker's log for this plugin
export const transformApi = exportTransform(transform);
