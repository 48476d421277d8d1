// Registering a tenant ahead of its first key or event (tenants otherwise appear implicitly).
import type { Context } from '../context.js';
import { ensureTenant } from '../store/tenants.js';
import { audit, type Actor } from '../engine/audit.js';

export async function registerTenant(ctx: Context, id: string, actor: Actor): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    const now = ctx.clock();
    await ensureTenant(tx, id, now);
    await audit(tx, actor, 'tenant.create', id, {}, now);
  });
}
