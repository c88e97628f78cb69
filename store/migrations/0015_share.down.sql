DROP TABLE shares;
