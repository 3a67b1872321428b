// Staff accounts (admins): who may sign in to the console and with which role, a form
// to add a colleague, and a button to disable an account (its sessions end at once;
// its name stays in the history it made). The server keeps only Argon2id hashes; the
// password typed here goes to it once, over the session, and is not kept by the page.

import { errorText, ApiError } from './api.js';
import { h, field, fmtDateTime } from './util.js';

const ROLES = [
  ['front_desk', 'Front desk: check-in, check-out, no-show, cancellation'],
  ['revenue', 'Revenue: inventory, rates, restrictions, blocks'],
  ['auditor', 'Auditor: reads everything, changes nothing'],
  ['admin', 'Admin: everything, staff accounts included'],
];

export function mountStaff(root, ctx) {
  let alive = true;
  ctx.setTitle('Staff');
  const list = h('div', { class: 'staff-list' }, h('p', { class: 'loading' }, 'Loading…'));
  const status = h('div', { role: 'status', class: 'form-status' });

  if (!ctx.can.admin) {
    root.append(h('h1', { tabindex: '-1' }, 'Staff'),
      h('p', { class: 'muted' }, 'Only admins manage staff accounts.'));
    return { destroy() {} };
  }

  const email = h('input', { id: 'staff-email', name: 'email', type: 'email', required: true, autocomplete: 'off' });
  const name = h('input', { id: 'staff-name', name: 'name', required: true, maxlength: '200', autocomplete: 'off' });
  const role = h('select', { id: 'staff-role', name: 'role' },
    ROLES.map(([value, label]) => h('option', { value }, label)));
  const password = h('input', { id: 'staff-password', name: 'password', type: 'password', required: true, minlength: '12', autocomplete: 'new-password' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Add staff member');
  const form = h('form', { class: 'card staff-form', 'aria-labelledby': 'staff-form-h', novalidate: true },
    h('h2', { id: 'staff-form-h' }, 'Add a staff member'),
    field('E-mail', email), field('Name', name), field('Role', role),
    field('Password (at least 12 characters; tell them to keep it to themselves)', password),
    submit, status);

  root.append(
    h('h1', { tabindex: '-1' }, 'Staff'),
    h('p', { class: 'hint' }, 'Each person signs in as themselves: the history says who changed what.'),
    h('section', { class: 'card', 'aria-labelledby': 'staff-list-h' }, h('h2', { id: 'staff-list-h' }, 'Accounts'), list),
    form,
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    status.replaceChildren(h('p', { class: 'notice' }, 'Saving…'));
    try {
      const made = await ctx.api('/v1/staff', {
        method: 'POST',
        body: { email: email.value.trim(), name: name.value.trim(), role: role.value, password: password.value },
      });
      status.replaceChildren(h('p', { class: 'notice' }, `Added ${made.name} (${made.role.replace('_', ' ')}).`));
      ctx.announce(`Added ${made.name}.`);
      form.reset();
      load();
    } catch (e) {
      const fieldName = e instanceof ApiError ? e.details?.field : null;
      status.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
      const input = { email, name, role, password }[fieldName];
      if (input) input.focus();
    } finally {
      password.value = '';
      submit.disabled = false;
    }
  });

  async function disable(person, button) {
    if (!window.confirm(`Disable ${person.name}? They are signed out at once and cannot sign in again.`)) return;
    button.disabled = true;
    try {
      await ctx.api(`/v1/staff/${encodeURIComponent(person.staff_id)}`, { method: 'DELETE' });
      ctx.announce(`Disabled ${person.name}.`);
      load();
    } catch (e) {
      button.disabled = false;
      status.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
    }
  }

  async function load() {
    try {
      const body = await ctx.api('/v1/staff');
      if (!alive) return;
      const people = Array.isArray(body?.staff) ? body.staff : [];
      if (!people.length) {
        list.replaceChildren(h('p', { class: 'empty' }, 'No staff accounts yet.'));
        return;
      }
      // A phone scrolls the table in its own box, not the page.
      list.replaceChildren(h('div', { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': 'Staff accounts (scrolls sideways)' }, h('table', { class: 'data staff-table' },
        h('caption', { class: 'sr-only' }, 'Staff accounts'),
        h('thead', null, h('tr', null, ['Name', 'E-mail', 'Role', 'Since', 'State', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, people.map((p) => {
          const state = p.disabled_at ? `disabled ${fmtDateTime(p.disabled_at)}`
            : p.locked_until ? `locked until ${fmtDateTime(p.locked_until)}` : 'active';
          let action = null;
          if (!p.disabled_at && p.staff_id !== ctx.me?.staff_id) {
            action = h('button', { type: 'button', class: 'danger' }, `Disable ${p.name}`);
            action.addEventListener('click', () => disable(p, action));
          }
          return h('tr', { dataset: { staff: p.staff_id } },
            h('td', null, p.name), h('td', null, p.email), h('td', null, p.role.replace('_', ' ')),
            h('td', null, fmtDateTime(p.created_at)), h('td', null, state), h('td', null, action));
        })))));
    } catch (e) {
      if (alive) list.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not load the staff: ${errorText(e)}`));
    }
  }

  load();
  return {
    destroy() {
      alive = false;
    },
  };
}
