// Reading the audit log straight from the database, and making its writes fail, for the audit tests.
import type { AuditEntry } from '../../src/store/audit-log.js';
import type { Db } from '../../src/store/db.js';

export async function auditEntries(db: Db): Promise<AuditEntry[]> {
  return db.all<AuditEntry>('SELECT * FROM audit_log ORDER BY id');
}

/**
 * A trigger in the test's own database (SQLite file or PostgreSQL schema) that refuses every write to
 * audit_log, as a full disk or a broken table would; `restore` removes it.
 */
export async function refuseAuditWrites(db: Db): Promise<{ restore(): Promise<void> }> {
  if (db.dialect === 'postgres') {
    await db.run(
      `CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql
       AS $$ BEGIN RAISE EXCEPTION 'audit_log refuses writes (test)'; END $$`,
    );
    await db.run(
      `CREATE TRIGGER refuse_audit BEFORE INSERT OR UPDATE ON audit_log
       FOR EACH ROW EXECUTE FUNCTION refuse_audit()`,
    );
    return { restore: async () => void (await db.run('DROP TRIGGER refuse_audit ON audit_log')) };
  }
  for (const op of ['INSERT', 'UPDATE']) {
    await db.run(
      `CREATE TRIGGER refuse_audit_${op.toLowerCase()} BEFORE ${op} ON audit_log
       BEGIN SELECT RAISE(ABORT, 'audit_log refuses writes (test)'); END`,
    );
  }
  return {
    restore: async () => {
      await db.run('DROP TRIGGER refuse_audit_insert');
      await db.run('DROP TRIGGER refuse_audit_update');
    },
  };
}
