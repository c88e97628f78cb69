// The sidebar's date groups, by a thread's last update in the browser's
// local time: Today, Yesterday, Previous 7 days, Previous 30 days, then one
// group per month ("October 2026"). Pure: tested with node --test.

export type DateGroup<T> = { label: string; items: T[] };

const DAY = 24 * 60 * 60 * 1000;

function startOfDay(d: Date): number {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
}

/** The group label of a time, seen from now. */
export function dateGroupLabel(at: Date, now: Date): string {
  const today = startOfDay(now);
  const t = at.getTime();
  if (t >= today) return "Today";
  if (t >= today - DAY) return "Yesterday";
  if (t >= today - 7 * DAY) return "Previous 7 days";
  if (t >= today - 30 * DAY) return "Previous 30 days";
  return at.toLocaleDateString("en-US", { month: "long", year: "numeric" });
}

/** Groups items (already most recent first) by dateGroupLabel, keeping their order. */
export function groupByDate<T>(items: readonly T[], dateOf: (item: T) => string, now: Date): DateGroup<T>[] {
  const groups: DateGroup<T>[] = [];
  for (const item of items) {
    const at = new Date(dateOf(item));
    const label = Number.isNaN(at.getTime()) ? "Older" : dateGroupLabel(at, now);
    const last = groups.at(-1);
    if (last && last.label === label) last.items.push(item);
    else groups.push({ label, items: [item] });
  }
  return groups;
}
