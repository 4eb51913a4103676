/**
 * Entry point of the browser client the host serves at `/` (docs/web.md).
 *
 * The token is taken out of the URL fragment first thing, before anything
 * else can read or log the address.
 */
import { render } from 'preact';
import { takeTokenFromFragment } from './token';
import { App } from './ui/app';
import { Store } from './ui/store';
import './styles.css';

const params = takeTokenFromFragment();
const store = new Store(params);
const root = document.getElementById('app');
if (root) {
  render(<App store={store} />, root);
  store.start();
}
