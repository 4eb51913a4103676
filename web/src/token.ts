/**
 * Where the page's connection token lives, and the WebSocket URL it goes in.
 *
 * The token arrives in the URL fragment (`/#token=…`: a fragment is never
 * sent to any server, nor in a Referer) or from the user, who is asked for it
 * when the host refuses the connection. It is kept in this tab's
 * sessionStorage (gone when the tab closes) and the fragment is removed from
 * the address bar and the history entry at once.
 *
 * A browser WebSocket cannot set an Authorization header, so the token
 * travels as `?tkn=` on the upgrade request — only ever to the origin that
 * served this page (the CSP allows no other), i.e. the host itself. Behind
 * TLS (wss:) the query is encrypted like a header would be.
 */
const KEY = 'ahp-server.token';

function storage(): Storage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined; // storage disabled: the token lives in memory only
  }
}

let memory: string | null = null;

export function getToken(): string | null {
  return storage()?.getItem(KEY) ?? memory;
}

export function setToken(token: string | null): void {
  memory = token;
  const store = storage();
  if (!store) return;
  if (token) store.setItem(KEY, token);
  else store.removeItem(KEY);
}

/** Move `#token=…` from the address bar into storage; return the rest of the fragment. */
export function takeTokenFromFragment(): URLSearchParams {
  const params = new URLSearchParams(window.location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (token !== null) {
    setToken(token);
    params.delete('token');
    const rest = params.toString();
    const url = window.location.pathname + window.location.search + (rest ? `#${rest}` : '');
    window.history.replaceState(window.history.state, '', url);
  }
  return params;
}

/** `ws(s)://<this origin>/`, with the token as `?tkn=` when there is one. */
export function socketUrl(): string {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = new URL(`${scheme}//${window.location.host}/`);
  const token = getToken();
  if (token) url.searchParams.set('tkn', token);
  return url.toString();
}
