import Link from "next/link";

export const metadata = { title: "Not found · Threadline" };

export default function NotFound() {
  return <NotFoundView what="page" />;
}

/** The "not found" view: a page (Next's not-found) or a conversation (Chat). */
export function NotFoundView({ what }: { what: "page" | "conversation" }) {
  return (
    <div className="not-found" data-testid="not-found">
      <h1>{what === "page" ? "Page not found" : "Conversation not found"}</h1>
      <p className="muted">
        {what === "page"
          ? "There is nothing at this address."
          : "This conversation does not exist. It may have been deleted, or the link is wrong."}
      </p>
      <Link href="/welcome" className="button primary">
        Start a new chat
      </Link>
    </div>
  );
}
