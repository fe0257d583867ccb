import { runMain } from '../platform/main';
import { start } from './workers';

runMain('workers', start);
