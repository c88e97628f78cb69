"use client";

// Replies as GitHub-flavoured Markdown (remark-gfm: tables, strikethrough,
// task lists, autolinks), code highlighted by Prism through assistant-ui's
// syntax-highlighter package (class names, coloured by globals.css so that
// dark mode applies), links opened in a new tab without access to this one.

import { MarkdownTextPrimitive, type CodeHeaderProps } from "@assistant-ui/react-markdown";
import { makePrismAsyncSyntaxHighlighter } from "@assistant-ui/react-syntax-highlighter/full";
import { useState, type AnchorHTMLAttributes, type FC, type InputHTMLAttributes } from "react";
import remarkGfm from "remark-gfm";

const CodeHeader: FC<CodeHeaderProps> = ({ language, code }) => {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    void navigator.clipboard?.writeText(code).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    });
  };
  return (
    <div className="code-header">
      <span>{language || "text"}</span>
      <button type="button" className="link" onClick={copy} aria-label="Copy code">
        {copied ? "Copied" : "Copy"}
      </button>
    </div>
  );
};

const SyntaxHighlighter = makePrismAsyncSyntaxHighlighter({ useInlineStyles: false });

/** A link in a reply: a new tab, no window.opener, no referrer. */
const SafeLink: FC<AnchorHTMLAttributes<HTMLAnchorElement>> = ({ href, children, title }) => (
  <a href={href} title={title} target="_blank" rel="noopener noreferrer">
    {children}
  </a>
);

/**
 * A GFM task list's checkbox (read-only): labelled by its state, since the
 * task's text beside it is not its label.
 */
const TaskCheckbox: FC<InputHTMLAttributes<HTMLInputElement>> = ({ type, checked, ...rest }) =>
  type === "checkbox" ? (
    <input type="checkbox" checked={!!checked} readOnly disabled aria-label={checked ? "Done" : "Not done"} />
  ) : (
    <input type={type} {...rest} />
  );

const REMARK_PLUGINS = [remarkGfm];
const COMPONENTS = { CodeHeader, SyntaxHighlighter, a: SafeLink, input: TaskCheckbox };

export const MarkdownText: FC = () => (
  <MarkdownTextPrimitive className="markdown" smooth={false} remarkPlugins={REMARK_PLUGINS} components={COMPONENTS} />
);
