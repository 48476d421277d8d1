// Entry point: signing in and out, and switching between the three sections by the address's hash
// (#/overview, #/dead-letters?…, #/tenants/<id>) so reloads and the back button behave.
/* global document, window, URLSearchParams */
import { api, session, whenUnauthorized } from './api.js';
import { $, $$, alertBox, errorParts, fill, fmtNumber, h } from './dom.js';
import { hideDeadLetters, initDeadLetters, showDeadLetters } from './view-dead-letters.js';
import { closeInspect, initInspect } from './view-inspect.js';
import { hideOverview, initOverview, showOverview } from './view-overview.js';
import { hideTenants, initTenants, showTenants } from './view-tenants.js';

const VIEWS = {
  overview: { title: 'Overview', show: showOverview, hide: hideOverview },
  'dead-letters': { title: 'Dead letters', show: showDeadLetters, hide: hideDeadLetters },
  tenants: { title: 'Tenants & endpoints', show: showTenants, hide: hideTenants },
};

let signedIn = false;
let active = null;

function parseHash() {
  const raw = window.location.hash.replace(/^#\/?/, '');
  const [path, search = ''] = raw.split('?');
  const [name, ...rest] = path.split('/');
  let tail = '';
  try {
    tail = decodeURIComponent(rest.join('/'));
  } catch {
    tail = '';
  }
  return { name: name in VIEWS ? name : 'overview', tail, params: new URLSearchParams(search) };
}

function route() {
  if (!signedIn) return;
  const { name, tail, params } = parseHash();
  closeInspect();
  if (active && active !== name) VIEWS[active].hide();
  active = name;
  for (const section of $$('[data-view]')) section.hidden = section.dataset.view !== name;
  for (const link of $$('[data-nav]')) {
    const current = link.dataset.nav === name;
    link.classList.toggle('active', current);
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${VIEWS[name].title} · hookline console`;
  VIEWS[name].show(params, tail);
}

/** The sidebar's count of dead letters awaiting an operator, kept current by every stats read. */
function showDeadCount(stats) {
  const badge = $('#nav-dead-count');
  const n = stats?.current?.dead_letters_awaiting ?? 0;
  badge.hidden = n === 0;
  fill(badge, fmtNumber(n));
}

/** What a refused key means for the person holding it; a 403 is said plainly and shows nothing else. */
function refusal(err) {
  if (err.status === 401)
    return [h('strong', {}, 'Unknown or revoked key.'), ' Check the key and try again.'];
  if (err.status === 403) {
    return [
      h('strong', {}, 'This is not an instance-manager key.'),
      ' The console is for operators; tenant and producer keys cannot open it.',
    ];
  }
  return ['Could not sign in: ', ...errorParts(err)];
}

function showSignIn(err = null) {
  signedIn = false;
  if (active) VIEWS[active].hide();
  active = null;
  closeInspect();
  $('#shell').hidden = true;
  $('#signin').hidden = false;
  document.title = 'Sign in · hookline console';
  if (err) alertBox($('#signin-error'), 'danger', ...refusal(err));
  else alertBox($('#signin-error'), null);
  $('#signin-key').value = '';
  $('#signin-key').focus();
}

function showShell(key, stats) {
  signedIn = true;
  $('#signin').hidden = true;
  $('#shell').hidden = false;
  // Enough of the key to tell two apart, never the whole secret on screen.
  fill($('#who-key'), `${key.slice(0, 10)}…`);
  showDeadCount(stats);
  route();
}

/** A key is accepted only once the admin API itself accepts it; only then is it kept. */
async function signIn(key) {
  const button = $('#signin-submit');
  button.disabled = true;
  fill(button, 'Signing in…');
  try {
    const stats = await api('/v1/admin/stats?minutes=1', { key, quiet401: true });
    session.set(key);
    showShell(key, stats);
  } catch (err) {
    // A refused key is not kept, not even for this tab.
    session.clear();
    showSignIn(err);
  } finally {
    button.disabled = false;
    fill(button, 'Sign in');
  }
}

function boot() {
  initOverview();
  initDeadLetters();
  initTenants();
  initInspect();
  whenUnauthorized((err) => {
    session.clear();
    showSignIn(err);
  });
  document.addEventListener('hookline:stats', (event) => showDeadCount(event.detail));
  window.addEventListener('hashchange', route);

  $('#signin-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = $('#signin-key').value.trim();
    if (!key) {
      alertBox($('#signin-error'), 'danger', 'Paste an instance-manager key first.');
      return;
    }
    void signIn(key);
  });
  $('#signout').addEventListener('click', () => {
    session.clear();
    showSignIn();
  });

  const stored = session.get();
  if (stored) void signIn(stored);
  else showSignIn();
}

boot();
