import { runMain } from '../platform/main';
import { start } from './app';

runMain('api', start);
