"""The caching ladder: one point's figures on one node (`figures`), the verdict judged from
them (`verdict`), its headline (`headline`), its words (`verdict_text`) and the caching what-if
(`caching`)."""
