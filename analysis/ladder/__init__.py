"""The caching ladder: one point's figures on one node (`figures`, read from the rows by
`measured`), its stages judged (`stages`), the verdict judged from them (`verdict`), its
headline (`headline`), its words (`verdict_text`) and the caching what-if (`caching`)."""
