-- Estimated occurrences (as a substring) of one string, with the noise sd and whether the
-- estimate is extrapolated (the Markov assumption: its error exceeds what std covers):
--   SELECT * FROM {{name}}_frequency([1, 1, 2]);
CREATE MACRO {{single_macro}}(string) AS TABLE
SELECT count, std, extrapolated FROM (
{{single_answers}}
);

-- Frequencies of a table of strings (an id column and a list column string), late bound:
--   SELECT * FROM {{name}}_frequencies('my_strings') ORDER BY id;
CREATE MACRO {{batch_macro}}(queries) AS TABLE
{{batch_answers}};
